package manifest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// sleep_after bounds (SPEC R81) and the most wake_ignore paths.
const (
	minSleepAfter  = 2 * time.Second
	maxSleepAfter  = 30 * 24 * time.Hour
	maxWakeIgnores = 64
)

// sleep validates sleep_after (a duration from 2s to 30 days) and
// wake_ignore (paths starting with "/", a "*" only at the end) of one
// service (SPEC R81). A one-shot never sleeps (it is not kept running), a
// service publishing UDP cannot sleep (a datagram cannot be held while
// it wakes), and wake_ignore needs sleep_after.
func (v *validator) sleep(key string, rawAfter *string, rawIgnore []string, svc *core.ServiceSpec) (core.Duration, []string) {
	var ignore []string
	for i, p := range rawIgnore {
		k := fmt.Sprintf("%s.wake_ignore[%d]", key, i)
		switch {
		case !strings.HasPrefix(p, "/"):
			v.addf(k, "%q: want a request path starting with /, such as \"/robots.txt\", or a prefix ending in *, such as \"/static/*\"", p)
		case strings.Contains(strings.TrimSuffix(p, "*"), "*"):
			v.addf(k, "%q: a * may only end the path (a prefix), such as \"/static/*\"", p)
		default:
			ignore = append(ignore, p)
		}
	}
	if len(rawIgnore) > maxWakeIgnores {
		v.addf(key+".wake_ignore", "%d paths: at most %d", len(rawIgnore), maxWakeIgnores)
	}
	if rawAfter == nil {
		if len(rawIgnore) > 0 {
			v.add(key+".wake_ignore", "wake_ignore lists paths that do not wake a sleeping service, and this service never sleeps: set sleep_after, or remove wake_ignore")
		}
		return 0, nil
	}
	d := v.duration(key+".sleep_after", rawAfter, minSleepAfter, maxSleepAfter)
	if d == 0 {
		return 0, nil
	}
	if svc.Run == core.RunOnce {
		v.add(key+".sleep_after", `a one-shot service (run = "once") runs to completion and is never kept running, so it cannot sleep; remove sleep_after`)
		return 0, nil
	}
	for _, u := range svc.UDP {
		if u.Publish != "" {
			v.addf(key+".sleep_after", "the service publishes UDP port %s, and a datagram cannot be held while the service wakes; remove sleep_after, or the UDP interface", u.Publish)
			return 0, nil
		}
	}
	return d, ignore
}

// sleepers checks sleep_after across the app (SPEC R81): a service others
// depend on sleeps only when each of them sleeps too (it would otherwise
// stop under a running dependant), and a sleeping service must be
// wakeable: it has a public HTTP host or a published TCP port, or a
// sleeping service depends on it (waking that one wakes it first).
func (v *validator) sleepers(services []core.ServiceSpec) {
	for i := range services {
		s := &services[i]
		if s.SleepAfter == 0 {
			continue
		}
		var awake, dependants []string
		for j := range services {
			d := &services[j]
			if slices.Contains(d.DependsOn, s.Name) {
				dependants = append(dependants, d.Name)
				if d.SleepAfter == 0 {
					awake = append(awake, d.Name)
				}
			}
		}
		key := "services." + s.Name + ".sleep_after"
		if len(awake) > 0 {
			v.addf(key, "%s depends on %s and does not sleep: a sleeping %s would stop under it; give %s a sleep_after too, or remove this one",
				strings.Join(awake, " and "), s.Name, s.Name, strings.Join(awake, " and "))
			continue
		}
		if len(dependants) == 0 && !wakeable(s) {
			v.addf(key, "nothing would wake %s: it has no public HTTP host and no published TCP port, and no sleeping service depends on it; add one, or remove sleep_after", s.Name)
		}
	}
}

// wakeable reports whether requests or connections reach s through the
// edge: a public HTTP interface with a host, or a published TCP port.
func wakeable(s *core.ServiceSpec) bool {
	for _, h := range s.HTTP {
		if h.Public() && h.Host != "" {
			return true
		}
	}
	for _, t := range s.TCP {
		if t.Publish != "" {
			return true
		}
	}
	return false
}
