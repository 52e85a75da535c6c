// Package composeapi is what the CLI needs of the compose loader
// (core/compose) without linking it: the loader's result and refusal types,
// the compose-or-TOML sniff, the bind policy, and the JSON exchange with the
// gordon-compose helper (cmd/gordon-compose), which runs the loader in its
// own process.
//
// Why a separate process: core/compose links compose-go and through it
// santhosh-tekuri/jsonschema, whose package init compiles every JSON Schema
// draft's metaschema (some 10 ms). Every docker-gordon process pays the init
// of what it links, and a `docker gordon VERB` starts two (the docker CLI's
// metadata call, then the verb), while only a verb given a compose file
// needs the loader. The installed build
// (-tags gordoncomposehelper, see the Makefile) therefore runs the loader
// through Exec; a plain `go build` links it in process.
package composeapi

import (
	"fmt"
	"os"
	"path/filepath"

	yaml "go.yaml.in/yaml/v4"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Result is a converted compose project.
type Result struct {
	// Files are the compose files that were loaded, in merge order.
	Files []string
	// Manifest is the equivalent app manifest (TOML), as convert prints it.
	Manifest []byte
	// Spec is Manifest parsed and validated by core/manifest, its build
	// contexts made absolute against WorkDir.
	Spec core.AppSpec
	// WorkDir is the project directory.
	WorkDir string
	// Source is the hex sha256 of Manifest (the revision's source digest).
	Source string
	// Secrets are the compose secrets with a file: or environment: source,
	// to store in the app's secret store before a deploy (values are read
	// by Value, never kept in the Result).
	Secrets []Secret
	// Notes say where a key is honoured differently from docker compose
	// (one line each, for stderr).
	Notes []string
}

// Secret is one compose secret a service receives as a file.
type Secret struct {
	// Service is the gordon service, Name the secret's name in the store.
	Service string
	Name    string
	// File is the absolute source file, or Env the variable, of the value.
	File string
	Env  string

	environ map[string]string
}

// EnvSecret is the secret name of service whose value is variable env of
// environ (the project's environment).
func EnvSecret(service, name, env string, environ map[string]string) Secret {
	return Secret{Service: service, Name: name, Env: env, environ: environ}
}

// Value reads the secret's value (from its file or variable). Its errors
// name the secret and the source, never the value.
func (s Secret) Value() ([]byte, error) {
	if s.File != "" {
		b, err := os.ReadFile(s.File)
		if err != nil {
			return nil, fmt.Errorf("secret %s of service %s: %w", s.Name, s.Service, err)
		}
		return b, nil
	}
	v, ok := s.environ[s.Env]
	if !ok {
		return nil, fmt.Errorf("secret %s of service %s: variable %s is not set", s.Name, s.Service, s.Env)
	}
	return []byte(v), nil
}

// AbsBuildContexts makes the build contexts of spec absolute against the
// project directory (convert writes them relative to it).
func AbsBuildContexts(spec *core.AppSpec, workDir string) {
	for i := range spec.Services {
		if b := spec.Services[i].Build; b != nil && !filepath.IsAbs(b.Context) {
			b.Context = filepath.Join(workDir, filepath.FromSlash(b.Context))
		}
	}
}

// composeTopKeys are the top-level keys of the compose specification.
var composeTopKeys = map[string]bool{
	"version": true, "name": true, "services": true, "volumes": true, "networks": true,
	"secrets": true, "configs": true, "include": true, "models": true,
}

// IsCompose reports whether data is a compose file rather than a TOML
// manifest: it is YAML (or JSON) whose top level is a mapping holding a
// services mapping, or only compose top-level keys. A TOML manifest never
// parses so (its tables are not YAML mappings).
func IsCompose(data []byte) bool {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil || len(n.Content) == 0 {
		return false
	}
	top := n.Content[0]
	if top.Kind != yaml.MappingNode {
		return false
	}
	found := false
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i].Value, top.Content[i+1]
		switch {
		case k == "services" || k == "include":
			if v.Kind != yaml.MappingNode && v.Kind != yaml.SequenceNode {
				return false
			}
			found = true
		case composeTopKeys[k] || len(k) > 2 && k[:2] == "x-":
		default:
			return false
		}
	}
	return found
}
