package manifest

import (
	"fmt"
	"strings"
)

// placementRE is one swarm placement constraint: a node or engine
// attribute, == or !=, a value.
var placementRE = newLazyRE(`^(node\.(id|hostname|role|platform\.os|platform\.arch|labels\.[A-Za-z0-9_.-]+)|engine\.labels\.[A-Za-z0-9_.-]+)\s*(==|!=)\s*([^\s=!]+)$`)

// placement validates placement = ["node.role == worker", ...]: Swarm's
// placement constraints, honoured on a swarm (the runtime places every
// instance on a node that satisfies all of them) and ignored on one
// engine. Each is returned without spaces ("node.role==worker").
func (v *validator) placement(key string, raw []string) []string {
	var out []string
	for i, c := range raw {
		m := placementRE.FindStringSubmatch(strings.TrimSpace(c))
		if m == nil {
			v.addf(fmt.Sprintf("%s[%d]", key, i), `invalid placement constraint %q: want ATTRIBUTE == VALUE or ATTRIBUTE != VALUE, ATTRIBUTE one of node.id, node.hostname, node.role, node.platform.os, node.platform.arch, node.labels.NAME, engine.labels.NAME (docker service create --constraint)`, c)
			continue
		}
		if m[2] == "role" && m[4] != "manager" && m[4] != "worker" {
			v.addf(fmt.Sprintf("%s[%d]", key, i), `invalid placement constraint %q: node.role is manager or worker`, c)
			continue
		}
		out = append(out, m[1]+m[3]+m[4])
	}
	return out
}
