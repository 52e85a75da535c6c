package compose

import (
	"maps"
	"path/filepath"
	"slices"

	"github.com/compose-spec/compose-go/v2/types"
)

// build is [services.X.build] as convert writes it (core/manifest's keys).
type build struct {
	Context    string            `toml:"context"`
	Dockerfile string            `toml:"dockerfile,omitempty"`
	Args       map[string]string `toml:"args,omitempty"`
	Target     string            `toml:"target,omitempty"`
	Labels     map[string]string `toml:"labels,omitempty"`
}

// buildIgnored are build keys that only tune how an image is built here
// (the cache): not mapped, noted.
var buildIgnored = map[string]bool{"cache_from": true, "cache_to": true, "no_cache": true, "no_cache_filter": true, "pull": true, "provenance": true, "sbom": true}

// buildRefused say why a build key cannot be honoured by the engine's
// build API (docker gordon builds with the classic builder, no BuildKit
// session).
var buildRefused = map[string]string{
	"dockerfile_inline":   "not supported: write the Dockerfile into the context and name it with dockerfile",
	"additional_contexts": "not supported: the build gets one context; copy what it needs into it",
	"ssh":                 "not supported: the build has no SSH agent; fetch private sources before the build",
	"secrets":             "not supported: build secrets need BuildKit; docker gordon builds through the engine's classic build API",
	"platforms":           "not supported: the image is built for the engine's platform",
	"tags":                "not supported: the build is tagged gordon/<app>-<service>:<hash> (and with image, if set)",
	"network":             "not supported: the build uses the engine's default build network",
	"extra_hosts":         "not supported yet: extra hosts for the build",
	"isolation":           "not supported: the engine's default isolation",
	"privileged":          "not supported: docker gordon does not run privileged builds",
	"entitlements":        "not supported: docker gordon does not grant build entitlements",
	"shm_size":            "not supported yet: shm_size for the build",
	"ulimits":             "not supported yet: ulimits for the build",
}

// buildOf maps services.X.build: the short form (a path) and the long
// form's context, dockerfile, args, target and labels. The context is
// written relative to the project directory (so the converted manifest,
// saved there, names the same directory); an argument without a value
// takes the project environment's, as compose does, and is left out when
// that is unset too.
func (m *mapper) buildOf(name string, svc *types.ServiceConfig, raw map[string]any) *build {
	if svc.Build == nil {
		return nil
	}
	base := "services." + name + ".build"
	if long, ok := raw["build"].(map[string]any); ok {
		for _, k := range slices.Sorted(maps.Keys(long)) {
			switch {
			case k == "context", k == "dockerfile", k == "args", k == "target", k == "labels":
			case buildIgnored[k]:
				m.note("%s: build.%s is not used: the engine's build cache decides", name, k)
			case buildRefused[k] != "":
				m.refuse(base+"."+k, "build.%s %s", k, buildRefused[k])
			default:
				m.refuse(base+"."+k, "build.%s not supported: remove it (docs/compose.md lists the build keys)", k)
			}
		}
	}
	b := &build{Context: svc.Build.Context, Dockerfile: svc.Build.Dockerfile, Target: svc.Build.Target}
	if b.Context == "" {
		b.Context = "."
	}
	if filepath.IsAbs(b.Context) && m.p.WorkingDir != "" {
		if rel, err := filepath.Rel(m.p.WorkingDir, b.Context); err == nil {
			b.Context = filepath.ToSlash(rel)
		}
	}
	if b.Dockerfile == "Dockerfile" {
		b.Dockerfile = ""
	}
	for k, v := range svc.Build.Args {
		val := v
		if val == nil {
			env, ok := m.p.Environment[k]
			if !ok {
				continue
			}
			val = &env
		}
		if b.Args == nil {
			b.Args = map[string]string{}
		}
		b.Args[k] = *val
	}
	if len(svc.Build.Labels) > 0 {
		b.Labels = maps.Clone(map[string]string(svc.Build.Labels))
	}
	m.from("services."+name+".build", base)
	return b
}
