package steps

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// UnmappedImageVolumes returns the paths the image declares with VOLUME
// that spec mounts nothing at (neither a [[volume]] nor a [[bind]]), in
// the image's (sorted) order. Docker would create an anonymous volume for
// each: per generation, so a replacement starts with an empty directory.
func UnmappedImageVolumes(spec *core.ServiceSpec, img core.ImageRef) []string {
	mapped := map[string]bool{}
	for _, v := range spec.Volumes {
		mapped[path.Clean(v.Path)] = true
	}
	for _, b := range spec.Binds {
		mapped[path.Clean(b.Path)] = true
	}
	var out []string
	for _, p := range img.Volumes {
		if !mapped[path.Clean(p)] {
			out = append(out, p)
		}
	}
	return out
}

var volumeNameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// ImageVolumeError is the refusal of a service whose image declares
// VOLUMEs the manifest does not map (it wraps ErrInvalid). Lines are the
// exact manifest lines to add.
type ImageVolumeError struct {
	App, Service, Image string
	Paths               []string
	Lines               string
}

func (e *ImageVolumeError) Error() string {
	return fmt.Sprintf("%s: app %s service %s: image %s declares VOLUME %s, which the manifest does not map: "+
		"each generation would get its own anonymous volume and the data written there would not reach the next one. "+
		"Map it to a named volume (kept across deploys and removal) by adding to the manifest:\n\n%s",
		core.ErrInvalid, e.App, e.Service, e.Image, strings.Join(e.Paths, ", "), e.Lines)
}

// Unwrap returns ErrInvalid.
func (e *ImageVolumeError) Unwrap() error { return core.ErrInvalid }

// CheckImageVolumes refuses spec when img declares a VOLUME that spec does
// not map (see UnmappedImageVolumes); the error names each path and gives
// the [[services.<name>.volume]] tables to add, with names derived from the
// path's last element and unique within the service.
func CheckImageVolumes(app string, spec *core.ServiceSpec, img core.ImageRef) error {
	paths := UnmappedImageVolumes(spec, img)
	if len(paths) == 0 {
		return nil
	}
	used := map[string]bool{}
	for _, v := range spec.Volumes {
		used[v.Name] = true
	}
	var b strings.Builder
	for i, p := range paths {
		name := strings.Trim(volumeNameUnsafe.ReplaceAllString(path.Base(p), "-"), "-._")
		if name == "" {
			name = "data"
		}
		base := name
		for n := 2; used[name]; n++ {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		used[name] = true
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[[services.%s.volume]]\nname = %q\npath = %q\n", spec.Name, name, p)
	}
	return &ImageVolumeError{App: app, Service: spec.Name, Image: spec.Image, Paths: paths, Lines: b.String()}
}

// CheckImages resolves every service's image that is present on the
// engine (never pulls) and refuses the spec when one declares an unmapped
// VOLUME (CheckImageVolumes), readiness "docker" without a healthcheck, or
// ulimits the engine cannot grant (checkUlimits: a short-lived check
// container, removed at once). Images not present are skipped: preflight
// checks them again once pulled. It changes nothing of any app; `deploy`,
// `deploy --dry-run` and `validate` call it before anything is stored.
func (e *Engine) CheckImages(ctx context.Context, spec core.AppSpec) error {
	var errs []error
	for i := range spec.Services {
		s := &spec.Services[i]
		img, err := e.ResolveImage(ctx, HeldOf(ctx), s.Image)
		if errors.Is(err, core.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("app %s: service %s: resolve image %s: %w", spec.Name, s.Name, s.Image, err)
		}
		if err := CheckImageVolumes(spec.Name, s, img); err != nil {
			errs = append(errs, err)
		}
		if err := CheckDockerReadiness(spec.Name, s, img); err != nil {
			errs = append(errs, err)
		}
		if err := e.CheckUlimits(ctx, spec.Name, s, img); err != nil {
			errs = append(errs, fmt.Errorf("app %s service %s: %w", spec.Name, s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// MissingImages returns "service: image" for each service of spec whose
// image the engine does not have (a deploy pulls it first, and fails when it
// cannot). It only reads the engine. Errors: a resolve that fails otherwise
// than not-found, naming the service.
func (e *Engine) MissingImages(ctx context.Context, spec core.AppSpec) ([]string, error) {
	var out []string
	for i := range spec.Services {
		s := &spec.Services[i]
		_, err := e.ResolveImage(ctx, HeldOf(ctx), s.Image)
		switch {
		case errors.Is(err, core.ErrNotFound):
			out = append(out, s.Name+": "+s.Image)
		case err != nil:
			return nil, fmt.Errorf("app %s: service %s: resolve image %s: %w", spec.Name, s.Name, s.Image, err)
		}
	}
	return out, nil
}

// checkDockerReadiness refuses readiness type "docker" when neither the
// manifest nor the image declares a healthcheck.
func CheckDockerReadiness(app string, s *core.ServiceSpec, img core.ImageRef) error {
	if s.Readiness.Type == core.ReadinessDocker && !HasHealthcheck(s, img) {
		return fmt.Errorf("%w: app %s service %s: readiness type \"docker\" waits for Docker's health status, but image %s has no HEALTHCHECK and the manifest declares no [services.%s.healthcheck]: add one, or choose another readiness type",
			core.ErrInvalid, app, s.Name, s.Image, s.Name)
	}
	return nil
}
