package manifest

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/schedule"
)

// rawJob is one [jobs.NAME].
type rawJob struct {
	Service  *string   `toml:"service"`
	Schedule *string   `toml:"schedule"`
	Command  *[]string `toml:"command"`
	Timeout  *string   `toml:"timeout"`
}

var jobKeys = []string{"service", "schedule", "command", "timeout"}

// Bounds of a job's timeout (core/engine/jobs defaults it to 10m).
const (
	minJobTimeout = time.Second
	maxJobTimeout = 24 * time.Hour
)

// jobs validates [jobs.NAME] against the app's services: a DNS label name,
// service naming a declared service that keeps running (not a one-shot),
// a schedule core/schedule reads, a non-empty command, timeout 1s..24h.
func (v *validator) jobs(raw map[string]rawJob, services []core.ServiceSpec) []core.JobSpec {
	byName := map[string]*core.ServiceSpec{}
	var names []string
	for i := range services {
		byName[services[i].Name] = &services[i]
		names = append(names, services[i].Name)
	}
	var out []core.JobSpec
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		key := "jobs." + name
		r := raw[name]
		ok := true
		if !dnsLabelRE.MatchString(name) {
			v.addf(key, "invalid job name %q: %s", name, dnsLabelRule)
			ok = false
		}
		j := core.JobSpec{Name: name}
		switch {
		case r.Service == nil:
			v.addf(key, `[jobs.%s] needs service = "NAME": the service whose image, env and secrets the job runs with (one of: %s)`, name, strings.Join(names, ", "))
			ok = false
		case byName[*r.Service] == nil:
			v.addf(key+".service", "job %s names service %q, which this manifest does not declare (declared: %s)", name, *r.Service, strings.Join(names, ", "))
			ok = false
		case byName[*r.Service].Run == core.RunOnce:
			v.addf(key+".service", `job %s names service %q, which runs once (run = "once") and so has no serving generation to run the job as; name a service that keeps running`, name, *r.Service)
			ok = false
		default:
			j.Service = *r.Service
		}
		switch {
		case r.Schedule == nil:
			v.addf(key, `[jobs.%s] needs schedule: "@every 1h", "@daily" or five cron fields such as "0 3 * * *" (UTC)`, name)
			ok = false
		default:
			s, err := schedule.Parse(*r.Schedule)
			if err != nil {
				v.add(key+".schedule", err.Error())
				ok = false
			}
			j.Schedule = s.String()
		}
		switch {
		case r.Command == nil || len(*r.Command) == 0:
			v.addf(key, `[jobs.%s] needs command: a non-empty argv array such as ["./manage", "clearsessions"] (no shell; use ["sh", "-c", "…"] for one)`, name)
			ok = false
		case (*r.Command)[0] == "":
			v.addf(key+".command", "job %s: the command's program (its first element) is empty", name)
			ok = false
		default:
			j.Command = slices.Clone(*r.Command)
		}
		if r.Timeout != nil {
			d := v.duration(key+".timeout", r.Timeout, minJobTimeout, maxJobTimeout)
			if d == 0 {
				ok = false
			}
			j.Timeout = d
		}
		if ok {
			out = append(out, j)
		}
	}
	return out
}
