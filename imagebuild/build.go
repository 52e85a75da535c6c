// Package imagebuild builds an app's services' images on the engine a
// deploy acts on, as docker build does (the context minus .dockerignore,
// the classic builder's API), under tags derived from the context's
// contents and the build settings, so an unchanged service builds nothing
// new; with a manifest registry it pushes them and pins the digest.
package imagebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
)

// Mode says whether deploy builds: when the tag is missing (""),
// always ("always", deploy --build), never ("never", deploy --no-build:
// a missing image is refused) or not at all ("plan", a dry run: the tags
// are computed, nothing is built).
type Mode string

const (
	Missing Mode = ""
	Always  Mode = "always"
	Never   Mode = "never"
	Plan    Mode = "plan"
)

// buildTailLines is how many of a failed build's last output lines are
// shown.
const buildTailLines = 10

// Image is one service's build result.
type Image struct {
	Service string `json:"service"`
	Tag     string `json:"tag"`
	ID      string `json:"id,omitempty"`
	Built   bool   `json:"built"`
}

// Resolve builds, on the engine api talks to, each service of spec
// that has a build, and replaces its build with the resulting image: the
// service's image when it names one (tagged with it, as compose does),
// else gordon/<app>-<service>:<hash>. A build whose tag exists is not run
// again (unless mode is Always), so an unchanged context and
// unchanged settings deploy nothing new. A plan (Plan) computes the
// tags and keeps each build section, so the planner knows the image is
// built on deploy. Progress goes to progress (nil:
// none), one line per Dockerfile step. A failed build returns an error
// naming the service and the failing step; its last output lines are
// written to errw. spec is changed only when every build succeeded.
func Resolve(ctx context.Context, api client.APIClient, spec *core.AppSpec, mode Mode, progress, errw io.Writer) ([]Image, error) {
	return (&Builder{API: api, Mode: mode, Progress: progress, Errw: errw}).Resolve(ctx, spec)
}

// Builder runs the builds of one deploy. Auths are the client's registry
// credentials by registry host, which the engine uses to pull base images
// (FROM), as docker build sends them. API may be nil for a Plan (a dry
// run talks to no engine).
type Builder struct {
	API   client.APIClient
	Auths map[string]registry.AuthConfig
	// PushAuth returns the encoded credentials for pushing ref (nil:
	// none).
	PushAuth func(ref string) string
	Mode     Mode
	app      string
	// Progress gets one line per Dockerfile step (nil: none); Errw a
	// failed build's last output lines.
	Progress, Errw io.Writer
}

// Resolve is the package-level Resolve with bd's settings.
func (bd *Builder) Resolve(ctx context.Context, spec *core.AppSpec) ([]Image, error) {
	var out []Image
	images := map[string]string{}
	bd.app = spec.Name
	for _, s := range spec.Services {
		if s.Build == nil {
			continue
		}
		bc, err := readBuildContext(s.Build)
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", s.Name, err)
		}
		h, err := buildHash(bc, s.Build)
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", s.Name, err)
		}
		bi := Image{Service: s.Name, Tag: BuiltTag(cmpOr(spec.Registry, "gordon"), spec.Name, s.Name, h)}
		if bd.Mode != Plan {
			if err := bd.buildOne(ctx, bc, s, &bi); err != nil {
				return nil, err
			}
		}
		images[s.Name] = bi.Tag
		switch {
		case spec.Registry != "" && bd.Mode != Plan:
			dg, err := bd.push(ctx, s.Name, bi.Tag)
			if err != nil {
				return nil, err
			}
			images[s.Name] = bi.Tag + "@" + dg
		case spec.Registry == "" && s.Image != "":
			images[s.Name] = s.Image
		}
		out = append(out, bi)
	}
	for i := range spec.Services {
		if ref, ok := images[spec.Services[i].Name]; ok {
			spec.Services[i].Image = ref
			if bd.Mode != Plan {
				// A plan keeps the build: it tells "built on deploy" from
				// "pulled", and a changed context from a changed image.
				spec.Services[i].Build = nil
			}
		}
	}
	return out, nil
}

// push pushes ref (a tag under the manifest's registry) with the
// client's credentials and returns the digest the registry gave it.
func (bd *Builder) push(ctx context.Context, service, ref string) (string, error) {
	auth := ""
	if bd.PushAuth != nil {
		auth = bd.PushAuth(ref)
	}
	res, err := bd.API.ImagePush(ctx, ref, client.ImagePushOptions{RegistryAuth: auth})
	if err != nil {
		return "", fmt.Errorf("service %s: push %s: %w", service, ref, dockererr.Classify(err))
	}
	defer res.Close()
	dec := json.NewDecoder(res)
	digest := ""
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("service %s: push %s: %w", service, ref, err)
		}
		if m.Error != nil {
			return "", fmt.Errorf("service %s: push %s: %s (docker login to the registry?)", service, ref, m.Error.Message)
		}
		var aux struct{ Digest string }
		if m.Aux != nil && json.Unmarshal(*m.Aux, &aux) == nil && aux.Digest != "" {
			digest = aux.Digest
		}
	}
	if digest == "" {
		return "", fmt.Errorf("service %s: push %s: the registry reported no digest", service, ref)
	}
	if bd.Progress != nil {
		fmt.Fprintf(bd.Progress, "build %s: pushed %s@%s\n", service, ref, digest)
	}
	return digest, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// HasBuilds reports whether a service of spec has a build.
func HasBuilds(spec core.AppSpec) bool {
	for _, s := range spec.Services {
		if s.Build != nil {
			return true
		}
	}
	return false
}

// buildOne builds service s unless its tag exists (and mode allows), then
// tags the image with s.Image when set. bi gets the image ID.
func (bd *Builder) buildOne(ctx context.Context, bc *buildContext, s core.ServiceSpec, bi *Image) error {
	api, mode, progress := bd.API, bd.Mode, bd.Progress
	have, err := api.ImageInspect(ctx, bi.Tag)
	switch {
	case err != nil && !cerrdefs.IsNotFound(err):
		return fmt.Errorf("service %s: image %s: %w", s.Name, bi.Tag, dockererr.Classify(err))
	case err != nil && mode == Never:
		return fmt.Errorf("service %s: image %s is not built and --no-build was given: deploy without --no-build to build it", s.Name, bi.Tag)
	case err == nil && mode != Always:
		bi.ID = have.ID
		if progress != nil {
			fmt.Fprintf(progress, "build %s: unchanged context and settings: %s (%s)\n", s.Name, bi.Tag, shortID(bi.ID))
		}
	default:
		id, err := bd.runBuild(ctx, bc, s, bi.Tag)
		if err != nil {
			return err
		}
		bi.ID, bi.Built = id, true
	}
	if s.Image != "" {
		if _, err := api.ImageTag(ctx, client.ImageTagOptions{Source: bi.ID, Target: s.Image}); err != nil {
			return fmt.Errorf("service %s: tag %s as %s: %w", s.Name, shortID(bi.ID), s.Image, dockererr.Classify(err))
		}
	}
	return nil
}

// runBuild streams the context to the engine's build API and follows its
// output; it returns the built image's ID.
func (bd *Builder) runBuild(ctx context.Context, bc *buildContext, s core.ServiceSpec, tag string) (string, error) {
	api, progress, errw := bd.API, bd.Progress, bd.Errw
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(bc.writeTar(pw)) }()
	defer pr.Close()
	args := map[string]*string{}
	for k, v := range s.Build.Args {
		args[k] = &v
	}
	res, err := api.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags: []string{tag}, Dockerfile: bc.dockerfile, BuildArgs: args, Target: s.Build.Target,
		Labels: Labels(bd.app, s.Name, s.Build.Labels), Remove: true, ForceRemove: true, Version: build.BuilderV1, AuthConfigs: bd.Auths,
	})
	if err != nil {
		return "", fmt.Errorf("service %s: build: %w", s.Name, dockererr.Classify(err))
	}
	defer res.Body.Close()
	f := &buildFollower{service: s.Name, progress: progress}
	if err := f.follow(res.Body); err != nil {
		if len(f.tail) > 0 {
			fmt.Fprintf(errw, "--- %s: last %d build output lines ---\n%s\n---\n", s.Name, len(f.tail), strings.Join(f.tail, "\n"))
		}
		return "", err
	}
	have, err := api.ImageInspect(ctx, tag)
	if err != nil {
		return "", fmt.Errorf("service %s: built image %s: %w", s.Name, tag, dockererr.Classify(err))
	}
	if progress != nil {
		fmt.Fprintf(progress, "build %s: built %s (%s)\n", s.Name, tag, shortID(have.ID))
	}
	return have.ID, nil
}

// buildFollower reads a classic build's JSON message stream: each
// "Step N/M : …" line goes to progress, the last output lines are kept
// for an error.
type buildFollower struct {
	service  string
	progress io.Writer
	step     string
	tail     []string
}

func (f *buildFollower) follow(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("service %s: build output: %w", f.service, err)
		}
		for line := range strings.SplitSeq(strings.TrimRight(m.Stream, "\n"), "\n") {
			f.line(line)
		}
		if m.Error != nil {
			at := "before its first step"
			if f.step != "" {
				at = "at " + f.step
			}
			return fmt.Errorf("service %s: build failed %s: %s", f.service, at, strings.TrimSpace(m.Error.Message))
		}
	}
}

func (f *buildFollower) line(line string) {
	line = strings.TrimRight(line, "\r")
	if strings.TrimSpace(line) == "" {
		return
	}
	if strings.HasPrefix(line, "Step ") {
		f.step = line
		if f.progress != nil {
			fmt.Fprintf(f.progress, "build %s: %s\n", f.service, line)
		}
	}
	f.tail = append(f.tail, line)
	if len(f.tail) > buildTailLines {
		f.tail = f.tail[1:]
	}
}

// shortID is the first 12 characters of a Docker ID (without "sha256:").
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// RoleBuild is the LabelRole of an image docker gordon built (prune.RoleBuild).
const RoleBuild = "build"

// Labels are the labels of a service's built image: the build's own (user)
// labels plus docker gordon's (managed, app, service, role build), which
// `docker gordon prune` finds its images by. A user label under
// core.LabelPrefix is overridden.
func Labels(app, service string, user map[string]string) map[string]string {
	out := make(map[string]string, len(user)+4)
	for k, v := range user {
		out[k] = v
	}
	out[core.LabelManaged], out[core.LabelApp], out[core.LabelService], out[core.LabelRole] = "true", app, service, RoleBuild
	return out
}
