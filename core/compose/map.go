package compose

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
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
	svc := ""
	if rest, ok := strings.CutPrefix(keyPath, "services."); ok {
		svc, _, _ = strings.Cut(rest, ".")
	}
	m.problems = append(m.problems, Problem{File: at.File, Line: at.Line, Column: at.Column, Service: svc, Key: keyPath, Message: msg})
}

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
	names := make([]string, 0, len(m.p.Services))
	for name := range m.p.Services {
		names = append(names, name)
	}
	sort.Strings(names)
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

// fmtDuration writes d as the manifest does: "1m" rather than "1m0s".
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
