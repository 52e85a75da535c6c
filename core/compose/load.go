// Package compose reads a Compose project (compose-spec, as `docker compose`
// loads it) and converts it into an app manifest: the same TOML document
// `docker gordon convert` prints, validated by core/manifest exactly as a
// hand-written manifest is, so a compose project and its converted manifest
// deploy to the same containers with the same guarantees.
//
// Every compose key is either mapped onto a manifest key, accepted because
// it is already honoured (expose, restart, profiles, extends, x-*), or
// refused with a Problem naming the service, the key, the compose file and
// line, and what to do instead. Nothing is dropped silently: a project is
// converted whole or not at all. docs/compose.md lists the mapping.
package compose

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/compose-spec/compose-go/v2/cli"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/composeapi"
	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

// Options select and load a compose project the way `docker compose` does.
type Options struct {
	// Files are the -f files, merged in order; empty means compose.yaml
	// (or compose.yml, docker-compose.yaml, ...) in WorkDir, with its
	// override file.
	Files []string
	// WorkDir is the project directory (--project-directory); empty means
	// the directory of the first file.
	WorkDir string
	// ProjectName overrides name: and the directory name (--project-name).
	ProjectName string
	// EnvFiles are --env-file files; empty means WorkDir/.env if present.
	EnvFiles []string
	// Profiles are the --profile values; COMPOSE_PROFILES applies when empty.
	Profiles []string
	// Environ is the process environment used for interpolation; nil means
	// os.Environ().
	Environ []string
	// BindName returns the operator-approved bind name whose host path is
	// hostPath (absolute, clean), or an error saying how to approve it.
	// nil refuses every bind.
	BindName func(hostPath string) (string, error)
}

// Result and Secret are composeapi's (see Problem).
type (
	Result = composeapi.Result
	Secret = composeapi.Secret
)

// Load loads the project, maps it and validates the mapped manifest. A
// project that cannot be honoured returns an *Error (wrapping
// core.ErrInvalid) listing every problem with its file and line; a project
// compose itself cannot load returns compose-go's error wrapped in
// core.ErrInvalid. Nothing is written.
func Load(ctx context.Context, o Options) (*Result, error) {
	environ := o.Environ
	if environ == nil {
		environ = os.Environ()
	}
	fns := []cli.ProjectOptionsFn{
		cli.WithEnv(environ),
		cli.WithEnvFiles(o.EnvFiles...),
		cli.WithDotEnv,
		cli.WithConfigFileEnv,
		cli.WithDefaultConfigPath,
		cli.WithName(o.ProjectName),
	}
	if o.WorkDir != "" {
		fns = append([]cli.ProjectOptionsFn{cli.WithWorkingDirectory(o.WorkDir)}, fns...)
	}
	if len(o.Profiles) > 0 {
		fns = append(fns, cli.WithProfiles(o.Profiles))
	} else {
		fns = append(fns, cli.WithDefaultProfiles())
	}
	po, err := cli.NewProjectOptions(o.Files, fns...)
	if err != nil {
		return nil, fmt.Errorf("compose: %w: %w", core.ErrInvalid, err)
	}
	ps := &positions{}
	for _, f := range po.ConfigPaths {
		if f == "-" {
			continue
		}
		if data, err := os.ReadFile(f); err == nil {
			ps.files = append(ps.files, indexFile(displayName(absPath(f)), data))
		}
	}
	project, err := po.LoadProject(ctx)
	if err != nil {
		if p, ok := unsetVarProblem(err, po.ConfigPaths, po.Environment); ok {
			return nil, &Error{Files: ps.names(), Problems: []Problem{p}}
		}
		return nil, loadError(err, ps)
	}
	files := append([]string(nil), project.ComposeFiles...)
	if len(ps.files) != len(files) {
		ps = &positions{}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("compose %s: %w: %w", f, core.ErrInvalid, err)
			}
			ps.files = append(ps.files, indexFile(displayName(f), data))
		}
	}
	model, err := modelOf(ctx, o, environ)
	if err != nil {
		return nil, loadError(err, ps)
	}
	m := newMapper(project, model, ps, o)
	doc := m.run()
	m.secretComments(doc)
	data, spec, err := m.validate(doc)
	if len(m.problems) > 0 {
		return nil, m.fail(files)
	}
	if err != nil {
		return nil, err
	}
	composeapi.AbsBuildContexts(&spec, project.WorkingDir)
	if err := manifest.ReadConfigFiles(&spec, project.WorkingDir); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	return &Result{
		Files:    displayNames(files),
		Manifest: data,
		Spec:     spec,
		WorkDir:  project.WorkingDir,
		Source:   hex.EncodeToString(sum[:]),
		Secrets:  m.secrets,
		Notes:    m.notes,
	}, nil
}

// secretComments adds to doc, for each compose secret stored from a file or
// variable, the command that stores it when the manifest is deployed
// instead of the compose file.
func (m *mapper) secretComments(doc *doc) {
	for _, s := range m.secrets {
		src, in := "variable "+s.Env, "printf %s \"$"+s.Env+"\" | "
		if s.File != "" {
			src, in = displayName(s.File), ""
		}
		set := fmt.Sprintf("%sdocker gordon secrets set %s %s %s", in, doc.Name, s.Service, s.Name)
		if s.File != "" {
			set += " < " + src
		}
		doc.comments = append(doc.comments, fmt.Sprintf("secret %s of %s: deploy -f on the compose file stores it from %s; with this manifest: %s", s.Name, s.Service, src, set))
	}
}

// validate encodes doc and validates it as core/manifest validates a
// hand-written manifest. It runs even when the mapping refused keys, so
// every problem of the project comes back at once: a broken manifest rule
// is recorded as a problem at the compose key it was mapped from (see
// manifestProblems), and the error is then not nil.
func (m *mapper) validate(doc *doc) ([]byte, core.AppSpec, error) {
	data, err := doc.encode()
	if err != nil {
		return nil, core.AppSpec{}, fmt.Errorf("compose: encode manifest: %w", err)
	}
	spec, err := manifest.Parse(composeapi.ManifestSource, data)
	if err != nil {
		var merr *manifest.ManifestError
		if errors.As(err, &merr) {
			m.manifestProblems(merr.Problems)
		}
		return nil, core.AppSpec{}, err
	}
	return data, spec, nil
}

// manifestKeyRE matches a manifest key a manifest message refers to
// ("already routed by services.api.http[0]").
var manifestKeyRE = regexp.MustCompile(`services\.[a-z0-9-]+(?:\.[a-z_]+(?:\[[0-9]+\])?)*`)

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// modelOf loads the merged, interpolated compose model (extends and
// includes resolved) as a plain tree: the keys the user wrote, without the
// defaults the typed loader adds, so every written key is checked.
func modelOf(ctx context.Context, o Options, environ []string) (map[string]any, error) {
	fns := []cli.ProjectOptionsFn{
		cli.WithEnv(environ),
		cli.WithEnvFiles(o.EnvFiles...),
		cli.WithDotEnv,
		cli.WithConfigFileEnv,
		cli.WithDefaultConfigPath,
		cli.WithName(o.ProjectName),
		cli.WithNormalization(false),
	}
	if o.WorkDir != "" {
		fns = append([]cli.ProjectOptionsFn{cli.WithWorkingDirectory(o.WorkDir)}, fns...)
	}
	po, err := cli.NewProjectOptions(o.Files, fns...)
	if err != nil {
		return nil, fmt.Errorf("compose: %w: %w", core.ErrInvalid, err)
	}
	model, err := po.LoadModel(ctx)
	if err != nil {
		return nil, fmt.Errorf("compose: %w: %w", core.ErrInvalid, err)
	}
	return model, nil
}

// displayName shortens an absolute compose path relative to the working
// directory when that is shorter, as users wrote it.
func displayName(path string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, path); err == nil && len(rel) < len(path) && !filepath.IsAbs(rel) && rel != "" && rel[0] != '.' {
			return rel
		}
	}
	return path
}

func displayNames(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = displayName(f)
	}
	return out
}

// IsCompose reports whether data is a compose file rather than a TOML
// manifest: it is YAML (or JSON) whose top level is a mapping holding a
// services mapping, or only compose top-level keys. A TOML manifest never
// parses so (its tables are not YAML mappings).
func IsCompose(data []byte) bool {
	return composeapi.IsCompose(data)
}
