package compose

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

// mapper converts one loaded project into a manifest doc, collecting every
// refusal instead of stopping at the first.
type mapper struct {
	p     *types.Project
	model map[string]any
	ps    *positions
	o     Options

	problems []Problem
	notes    []string
	secrets  []Secret
	// origin maps a manifest key ("services.web.replace") to the compose
	// key path it was mapped from, so a manifest rule the mapped project
	// breaks is reported at the compose file and line.
	origin map[string]string
	// networkNoted: the collapsing of compose networks was noted once.
	networkNoted bool
	// jobs are the services another one depends on with condition
	// service_completed_successfully: one-shots (run = "once").
	jobs map[string]bool
}

func newMapper(p *types.Project, model map[string]any, ps *positions, o Options) *mapper {
	jobs := map[string]bool{}
	for _, s := range p.Services {
		for d, dep := range s.DependsOn {
			if dep.Condition == types.ServiceConditionCompletedSuccessfully {
				jobs[d] = true
			}
		}
	}
	return &mapper{p: p, model: model, ps: ps, o: o, origin: map[string]string{}, jobs: jobs}
}

// refuse records a problem at the compose key path.
func (m *mapper) refuse(keyPath, format string, args ...any) {
	m.refuseAt(keyPath, "", fmt.Sprintf(format, args...))
}

// refuseAt records a problem at keyPath; item, when set, locates the
// element of the sequence at keyPath that starts with it.
func (m *mapper) refuseAt(keyPath, item, msg string) {
	var at location
	if item != "" {
		at = m.ps.locateItem(keyPath, item)
	} else {
		at = m.ps.locate(keyPath)
	}
	m.problems = append(m.problems, Problem{File: at.File, Line: at.Line, Column: at.Column, Service: serviceOf(keyPath), Key: keyPath, Message: msg})
}

// serviceOf returns the service a compose key path is under
// ("services.web.ports[0]" -> "web"), or "" for a top-level key.
func serviceOf(keyPath string) string {
	rest, ok := strings.CutPrefix(keyPath, "services.")
	if !ok {
		return ""
	}
	svc, _, _ := strings.Cut(rest, ".")
	return svc
}

// manifestProblems records the manifest rules the mapped project breaks,
// each at the compose key it was mapped from, except where a refusal
// already stands on that key or a parent of it: the manifest would only
// repeat its consequence (an image missing after a refused build).
func (m *mapper) manifestProblems(ps []manifest.Problem) {
	refused := make([]string, len(m.problems))
	for i, p := range m.problems {
		refused[i] = p.Key
	}
	for _, p := range ps {
		at := m.originOf(p.Key)
		if slices.ContainsFunc(refused, func(k string) bool { return at == k || strings.HasPrefix(at, k+".") || strings.HasPrefix(at, k+"[") }) {
			continue
		}
		m.refuseAt(at, "", manifestKeyRE.ReplaceAllStringFunc(p.Message, m.originOf))
	}
}

// note records a line saying where a key is honoured differently from
// docker compose.
func (m *mapper) note(format string, args ...any) {
	m.notes = append(m.notes, fmt.Sprintf(format, args...))
}

// fail returns the collected problems as one *Error.
func (m *mapper) fail(files []string) error {
	names := displayNames(files)
	sortProblems(names, m.problems)
	return &Error{Files: names, Problems: m.problems}
}

// from records that manifest key tomlKey comes from compose key keyPath.
func (m *mapper) from(tomlKey, keyPath string) {
	m.origin[tomlKey] = keyPath
}

// originOf returns the compose key path a manifest key was mapped from:
// the longest recorded prefix of tomlKey, else the service, else "name".
func (m *mapper) originOf(tomlKey string) string {
	if p, ok := m.origin[tomlKey+"[0]"]; ok {
		return p // a whole list: where its first element came from
	}
	for k := tomlKey; k != ""; k = parentPath(k) {
		if p, ok := m.origin[k]; ok {
			return p
		}
	}
	return "name"
}

// writtenKey returns keyPath when a compose file writes it, else parent:
// an element a short form or extends brought in is reported at its list.
func (m *mapper) writtenKey(keyPath, parent string) string {
	if m.ps.has(keyPath) {
		return keyPath
	}
	return parent
}

// modelService returns the user-written keys of service name.
func (m *mapper) modelService(name string) map[string]any {
	svcs, _ := m.model["services"].(map[string]any)
	s, _ := svcs[name].(map[string]any)
	return s
}

func (m *mapper) run() *doc {
	d := &doc{Name: m.p.Name, Services: map[string]*service{}}
	if _, ok := m.model["name"]; ok {
		m.from("name", "name")
	}
	m.topLevel(d)
	names := slices.Sorted(maps.Keys(m.p.Services))
	for _, name := range names {
		svc := m.p.Services[name]
		out := m.service(name, &svc)
		d.Services[name] = out
		m.from("services."+name, "services."+name)
	}
	if len(d.Services) == 0 {
		m.refuse("services", "no service to deploy (profiles select none, or the project declares none): enable one with --profile")
	}
	return d
}
