package compose

import (
	"fmt"
	"strconv"
)

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
