package manifest

import (
	"fmt"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// rawHealthcheck is [services.<name>.healthcheck] as written, with
// compose's key names; test is a string or an array, so it is decoded as
// any and checked by healthcheck.
type rawHealthcheck struct {
	Test        any     `toml:"test"`
	Interval    *string `toml:"interval"`
	Timeout     *string `toml:"timeout"`
	Retries     *int    `toml:"retries"`
	StartPeriod *string `toml:"start_period"`
	Disable     *bool   `toml:"disable"`
}

// healthcheck validates [services.<name>.healthcheck] (compose's meaning).
func (v *validator) healthcheck(k string, raw *rawHealthcheck) *core.Healthcheck {
	if raw == nil {
		return nil
	}
	h := &core.Healthcheck{}
	if raw.Disable != nil {
		h.Disable = *raw.Disable
	}
	const testRule = `want a shell command string (run by /bin/sh in the container), or an array ["CMD", "/bin/check", "arg"], ["CMD-SHELL", "command"] or ["NONE"]`
	switch t := raw.Test.(type) {
	case nil:
		if !h.Disable {
			v.add(k+".test", "required: the check to run; "+testRule+"; or set disable = true")
		}
	case string:
		if strings.TrimSpace(t) == "" {
			v.add(k+".test", "must not be empty; "+testRule)
		} else {
			h.Test = []string{"CMD-SHELL", t}
		}
	case []any:
		ok := len(t) > 0
		for i, e := range t {
			s, isStr := e.(string)
			if !isStr || s == "" {
				v.addf(fmt.Sprintf("%s.test[%d]", k, i), "must be a non-empty string, got %s", tomlType(e))
				ok = false
				continue
			}
			h.Test = append(h.Test, s)
		}
		switch {
		case len(t) == 0:
			v.add(k+".test", "must not be empty; "+testRule)
		case ok && !healthTypeRE.MatchString(h.Test[0]):
			v.addf(k+".test[0]", `invalid test kind %q: %s`, h.Test[0], testRule)
			ok = false
		case ok && h.Test[0] == "NONE" && len(h.Test) != 1:
			v.add(k+".test", `["NONE"] takes no arguments`)
			ok = false
		case ok && h.Test[0] != "NONE" && len(h.Test) < 2:
			v.addf(k+".test", `[%q] needs the command to run after it`, h.Test[0])
			ok = false
		}
		if !ok {
			h.Test = nil
		}
	default:
		v.addf(k+".test", "wrong type: %s, got %s", testRule, tomlType(t))
	}
	if h.Disable && raw.Test != nil {
		v.add(k+".disable", "disable = true turns the healthcheck off: remove test, or remove disable")
	}
	h.Interval = v.duration(k+".interval", raw.Interval, minHealthInterval, maxHealthInterval)
	h.Timeout = v.duration(k+".timeout", raw.Timeout, minHealthInterval, maxHealthInterval)
	h.StartPeriod = v.duration(k+".start_period", raw.StartPeriod, 0, maxHealthInterval)
	if raw.Retries != nil {
		if *raw.Retries < 1 || *raw.Retries > 100 {
			v.addf(k+".retries", "invalid retries %d: want from 1 to 100 consecutive failures", *raw.Retries)
		} else {
			h.Retries = *raw.Retries
		}
	}
	return h
}
