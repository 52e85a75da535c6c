package compose

import (
	"fmt"

	"github.com/mattn/go-shellwords"
)

// job is the manifest's [jobs.NAME]; the manifest validates it.
type job struct {
	Service  string    `toml:"service,omitempty"`
	Schedule string    `toml:"schedule,omitempty"`
	Command  *[]string `toml:"command,omitempty"`
	Timeout  string    `toml:"timeout,omitempty"`
}

// xJobs maps the project's x-gordon.jobs { NAME: { service, schedule,
// command, timeout } } (compose has no scheduled jobs of its own) onto
// the manifest's [jobs.NAME]; a missing key is left for the manifest to
// refuse. command is a list (argv, no shell) or a string split on spaces.
func (m *mapper) xJobs(r any, d *doc) {
	raw, ok := r.(map[string]any)
	if !ok {
		m.refuse("x-gordon", `x-gordon must be a mapping, e.g. { jobs: { cleanup: { service: web, schedule: "@daily", command: [./manage, cleanup] } } }`)
		return
	}
	for k, v := range raw {
		if k != "jobs" {
			m.refuse("x-gordon."+k, "unknown top-level x-gordon key %q: want jobs", k)
			continue
		}
		jobs, ok := v.(map[string]any)
		if !ok {
			m.refuse("x-gordon.jobs", "jobs must be a mapping of job names to { service, schedule, command, timeout }")
			continue
		}
		for name, jr := range jobs {
			m.xJob(name, jr, d)
		}
	}
}

// xJob maps one x-gordon.jobs.NAME.
func (m *mapper) xJob(name string, r any, d *doc) {
	base := "x-gordon.jobs." + name
	raw, ok := r.(map[string]any)
	if !ok {
		m.refuse(base, `a job must be a mapping, e.g. { service: web, schedule: "@daily", command: [./manage, cleanup] }`)
		return
	}
	j := &job{}
	for k, v := range raw {
		switch k {
		case "service":
			j.Service = fmt.Sprint(v)
		case "schedule":
			j.Schedule = fmt.Sprint(v)
		case "timeout":
			j.Timeout = fmt.Sprint(v)
		case "command":
			argv, ok := stringList(v)
			if !ok {
				m.refuse(base+".command", "command must be a list of strings (argv, no shell), e.g. [./manage, cleanup], or one string split into words like a shell would (check its quotes)")
				continue
			}
			j.Command = &argv
		default:
			m.refuse(base+"."+k, "unknown job key %q: want service, schedule, command or timeout", k)
			continue
		}
		m.from("jobs."+name+"."+k, base+"."+k)
	}
	m.from("jobs."+name, base)
	if d.Jobs == nil {
		d.Jobs = map[string]*job{}
	}
	d.Jobs[name] = j
}

// stringList reads a list of strings, or a string split on spaces.
func stringList(v any) ([]string, bool) {
	switch t := v.(type) {
	case string:
		// Split as compose splits a service's command string (shell
		// words: quotes group, backslashes escape), never on every space.
		args, err := shellwords.Parse(t)
		if err != nil {
			return nil, false
		}
		return args, true
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}
