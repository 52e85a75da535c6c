package manifest

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/distribution/reference"

	"github.com/gordon-deploy/docker-gordon/core"
)

// rawBuild is [services.X.build].
type rawBuild struct {
	Context    *string        `toml:"context"`
	Dockerfile *string        `toml:"dockerfile"`
	Args       map[string]any `toml:"args"`
	Target     *string        `toml:"target"`
	Labels     map[string]any `toml:"labels"`
}

// argNameRule says what a Dockerfile ARG name is.
const argNameRule = "names are [A-Za-z_][A-Za-z0-9_]*"

// build validates [services.X.build]: context is a non-empty directory
// path (relative to the manifest's directory; Load makes it absolute),
// dockerfile a relative path inside the context, args string values under
// ARG names, target a stage name. With image also set, the build is tagged
// with it, so image must be a tag, not a digest.
func (v *validator) build(key string, raw *rawBuild, image *string) *core.BuildSpec {
	if raw == nil {
		return nil
	}
	b := &core.BuildSpec{}
	switch {
	case raw.Context == nil:
		v.add(key+".context", `required: the build context directory, relative to this manifest (e.g. "." or "./web")`)
	case strings.TrimSpace(*raw.Context) == "":
		v.add(key+".context", `must not be empty: the build context directory, relative to this manifest (e.g. "." or "./web")`)
	case strings.Contains(*raw.Context, "://") || strings.HasPrefix(*raw.Context, "git@"):
		v.addf(key+".context", "context %q: a remote (URL or git) context is not supported; give a directory on this machine", *raw.Context)
	default:
		b.Context = *raw.Context
	}
	if raw.Dockerfile != nil {
		df := *raw.Dockerfile
		switch {
		case df == "":
			v.add(key+".dockerfile", `must not be empty: a path relative to the context (default "Dockerfile")`)
		case filepath.IsAbs(df) || !filepath.IsLocal(filepath.Clean(df)):
			v.addf(key+".dockerfile", "dockerfile %q must be a path inside the context, relative to it (the context is what is sent to the engine)", df)
		default:
			b.Dockerfile = filepath.ToSlash(filepath.Clean(df))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Args)) {
		k := key + ".args." + name
		if !envNameRE.MatchString(name) {
			v.addf(k, "invalid build argument name %q: %s", name, argNameRule)
			continue
		}
		s, ok := raw.Args[name].(string)
		if !ok {
			v.addf(k, "value must be a string, got %s: quote it, e.g. %s = \"%v\"", tomlType(raw.Args[name]), name, raw.Args[name])
			continue
		}
		if b.Args == nil {
			b.Args = map[string]string{}
		}
		b.Args[name] = s
	}
	if raw.Target != nil {
		if *raw.Target == "" || strings.ContainsFunc(*raw.Target, func(r rune) bool { return r <= ' ' }) {
			v.addf(key+".target", "invalid target %q: a build stage name (FROM … AS NAME)", *raw.Target)
		} else {
			b.Target = *raw.Target
		}
	}
	b.Labels = v.labels(key+".labels", raw.Labels)
	if image != nil && strings.Contains(*image, "@") {
		v.addf(key, "a built image is tagged with image, and %q is a digest: give a tag (name:tag) or remove image", *image)
	}
	return b
}

// registry validates registry = "host[:port]/prefix": a registry host
// (with a '.' or a port, or localhost) and a repository path prefix.
func (v *validator) registry(raw *string) string {
	if raw == nil {
		return ""
	}
	const want = `want "host[:port]/prefix", e.g. "registry.example.com/shop" or "127.0.0.1:5000/team"`
	r := *raw
	host, prefix, ok := strings.Cut(r, "/")
	if !ok || prefix == "" || strings.HasSuffix(prefix, "/") || !(strings.ContainsAny(host, ".:") || host == "localhost") {
		v.addf("registry", "invalid registry %q: %s", r, want)
		return ""
	}
	named, err := reference.ParseNormalizedNamed(r + "/x")
	if err != nil || reference.Domain(named) != host {
		v.addf("registry", "invalid registry %q: %s", r, want)
		return ""
	}
	return r
}

// resolveBuildContexts makes each relative build context absolute against
// dir, the directory of the manifest that names it.
func resolveBuildContexts(spec *core.AppSpec, dir string) {
	for i := range spec.Services {
		if b := spec.Services[i].Build; b != nil && !filepath.IsAbs(b.Context) {
			b.Context = filepath.Join(dir, b.Context)
		}
	}
}
