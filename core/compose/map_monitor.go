package compose

import (
	"fmt"
	"strconv"
)

// monitor is the manifest's [services.X.monitor] (SPEC R76); the manifest
// validates the ranges.
type monitor struct {
	Window       string  `toml:"window"`
	MaxErrorRate float64 `toml:"max_error_rate"`
	MinRequests  int64   `toml:"min_requests"`
}

// xMonitor maps x-gordon.monitor { window, max_error_rate, min_requests }
// (compose has no post-switch watch of its own) onto the manifest's
// [services.X.monitor]; a missing key is left for the manifest to refuse.
func (m *mapper) xMonitor(name string, r any, out *service) {
	base := "services." + name + ".x-gordon.monitor"
	raw, ok := r.(map[string]any)
	if !ok {
		m.refuse(base, `monitor must be a mapping, e.g. { window: 60s, max_error_rate: 0.05, min_requests: 20 }`)
		return
	}
	mo := &monitor{}
	for k, v := range raw {
		s := fmt.Sprint(v)
		switch k {
		case "window":
			mo.Window = s
		case "max_error_rate":
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				m.refuse(base+"."+k, "max_error_rate: %v: want a share from 0 to 1, such as 0.05", v)
				continue
			}
			mo.MaxErrorRate = f
		case "min_requests":
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				m.refuse(base+"."+k, "min_requests: %v: want a whole number of requests, such as 20", v)
				continue
			}
			mo.MinRequests = n
		default:
			m.refuse(base+"."+k, "unknown monitor key %q: want window, max_error_rate or min_requests", k)
			continue
		}
		m.from("services."+name+".monitor."+k, base+"."+k)
	}
	out.Monitor = mo
}

// xSleep maps x-gordon.sleep_after (a duration, such as 15m) and
// x-gordon.wake_ignore (a list of request paths) onto the manifest's
// sleep_after and wake_ignore (SPEC R81); the manifest validates them.
func (m *mapper) xSleep(name string, raw map[string]any, out *service) {
	base := "services." + name + ".x-gordon"
	if v, ok := raw["sleep_after"]; ok {
		out.SleepAfter = fmt.Sprint(v)
		m.from("services."+name+".sleep_after", base+".sleep_after")
	}
	if v, ok := raw["wake_ignore"]; ok {
		list, ok := v.([]any)
		if !ok {
			m.refuse(base+".wake_ignore", `wake_ignore must be a list of request paths, e.g. ["/robots.txt", "/static/*"]`)
			return
		}
		for _, p := range list {
			out.WakeIgnore = append(out.WakeIgnore, fmt.Sprint(p))
		}
		m.from("services."+name+".wake_ignore", base+".wake_ignore")
	}
}
