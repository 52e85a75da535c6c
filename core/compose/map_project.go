package compose

import (
	"slices"
	"strings"
)

// topLevel checks the project-wide keys: volumes, networks, secrets,
// configs, and x-gordon (its jobs).
func (m *mapper) topLevel(d *doc) {
	for k, v := range m.model {
		switch {
		case k == "x-gordon":
			m.xJobs(v, d)
		case k == "version", k == "name", k == "services", k == "include", strings.HasPrefix(k, "x-"):
		case k == "volumes":
			vols, _ := v.(map[string]any)
			for name, raw := range vols {
				def, _ := raw.(map[string]any)
				for key := range def {
					switch key {
					case "labels":
					case "external":
						m.refuse("volumes."+name+".external", "not supported: docker gordon creates and owns the app's volumes (gordon-<app>-<name>, kept across deploys and removal); drop external, or copy the data into the new volume")
					case "driver":
						if s, _ := def[key].(string); s != "local" {
							m.refuse("volumes."+name+".driver", "not supported: volumes use the local driver; remove driver")
						}
					default:
						m.refuse("volumes."+name+"."+key, "not supported: %s of a volume (docker gordon names and creates volumes itself); remove it", key)
					}
				}
			}
		case k == "networks":
			nets, _ := v.(map[string]any)
			for name, raw := range nets {
				def, _ := raw.(map[string]any)
				for key := range def {
					switch key {
					case "external", "name", "labels":
					case "driver":
						if s, _ := def[key].(string); s != "bridge" {
							m.refuse("networks."+name+".driver", "not supported: an app's network is a bridge network; remove driver")
						}
					default:
						m.refuse("networks."+name+"."+key, "not supported: %s of a network (each app has one bridge network, gordon-<app>); remove it", key)
					}
				}
			}
		case k == "secrets":
			m.topSecrets(v)
		case k == "configs":
			m.topConfigs(v)
		default:
			m.refuse(k, "not supported: top-level key %s", k)
		}
	}
	// External networks every service of the app joins.
	var shared []string
	for name, n := range m.p.Networks {
		if bool(n.External) {
			real := n.Name
			if real == "" {
				real = name
			}
			shared = append(shared, real)
		}
	}
	slices.Sort(shared)
	d.Networks = shared
	if len(shared) > 0 {
		m.from("networks", "networks")
	}
}

func (m *mapper) topSecrets(v any) {
	secs, _ := v.(map[string]any)
	for name, raw := range secs {
		def, _ := raw.(map[string]any)
		for key := range def {
			switch key {
			case "file", "environment", "external", "name", "labels":
			default:
				m.refuse("secrets."+name+"."+key, "not supported: %s of a secret; give file: PATH, environment: VAR or external: true (set with docker gordon secrets set)", key)
			}
		}
	}
}
