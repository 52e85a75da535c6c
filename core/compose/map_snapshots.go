package compose

import (
	"fmt"
	"strconv"
)

// backup is the manifest's [services.X.backup]; the manifest validates
// the values.
type backup struct {
	Every    string   `toml:"every,omitempty"`
	Schedule string   `toml:"schedule,omitempty"`
	Keep     *int     `toml:"keep,omitempty"`
	Command  []string `toml:"command,omitempty"`
	Timeout  string   `toml:"timeout,omitempty"`
}

// xBackup maps x-gordon.backup { every | schedule, keep, command,
// timeout }, when xg (the
// service's x-gordon) has it, onto the manifest's [services.X.backup].
func (m *mapper) xBackup(name string, xg map[string]any, out *service) {
	r, has := xg["backup"]
	if !has {
		return
	}
	base := "services." + name + ".x-gordon.backup"
	raw, ok := r.(map[string]any)
	if !ok {
		m.refuse(base, `backup must be a mapping, e.g. { every: 24h, keep: 7 }`)
		return
	}
	b := &backup{}
	for k, v := range raw {
		s := fmt.Sprint(v)
		switch k {
		case "every":
			b.Every = s
		case "schedule":
			b.Schedule = s
		case "timeout":
			b.Timeout = s
		case "command":
			argv, ok := stringList(v)
			if !ok {
				m.refuse(base+"."+k, `command must be a list, the program and its arguments, e.g. ["pg_dumpall", "-U", "postgres"], or one string split into words like a shell would (check its quotes)`)
				continue
			}
			b.Command = argv
		case "keep":
			n, err := strconv.Atoi(s)
			if err != nil {
				m.refuse(base+"."+k, "keep: %v: want a whole number of backups, such as 7", v)
				continue
			}
			b.Keep = &n
		default:
			m.refuse(base+"."+k, "unknown backup key %q: want every, schedule, keep, command or timeout", k)
			continue
		}
		m.from("services."+name+".backup."+k, base+"."+k)
	}
	out.Backup = b
}

// snapshots is the manifest's [services.X.snapshots]; the manifest
// validates the values.
type snapshots struct {
	BeforeDeploy string `toml:"before_deploy,omitempty"`
	Keep         *int   `toml:"keep,omitempty"`
}

// xSnapshots maps x-gordon.snapshots { before_deploy, keep }, when xg (the
// service's x-gordon) has it, onto the manifest's [services.X.snapshots].
func (m *mapper) xSnapshots(name string, xg map[string]any, out *service) {
	r, has := xg["snapshots"]
	if !has {
		return
	}
	base := "services." + name + ".x-gordon.snapshots"
	raw, ok := r.(map[string]any)
	if !ok {
		m.refuse(base, `snapshots must be a mapping, e.g. { before_deploy: auto, keep: 5 }`)
		return
	}
	sn := &snapshots{}
	for k, v := range raw {
		s := fmt.Sprint(v)
		switch k {
		case "before_deploy":
			sn.BeforeDeploy = s
		case "keep":
			n, err := strconv.Atoi(s)
			if err != nil {
				m.refuse(base+"."+k, "keep: %v: want a whole number of snapshots, such as 5", v)
				continue
			}
			sn.Keep = &n
		default:
			m.refuse(base+"."+k, "unknown snapshots key %q: want before_deploy or keep", k)
			continue
		}
		m.from("services."+name+".snapshots."+k, base+"."+k)
	}
	out.Snapshots = sn
}
