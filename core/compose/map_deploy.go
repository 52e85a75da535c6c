package compose

import (
	"github.com/compose-spec/compose-go/v2/types"
)

// deploy maps deploy: update_config.order → replace, replicas → replicas
// (the manifest refuses more than one instance of a single-writer
// service), placement.constraints → placement, limits.
func (m *mapper) deploy(name string, svc *types.ServiceConfig, raw map[string]any, out *service) {
	base := "services." + name + ".deploy"
	dep, _ := raw["deploy"].(map[string]any)
	for k, v := range dep {
		switch k {
		case "replicas", "update_config", "restart_policy":
		case "mode":
			if s, _ := v.(string); s != "replicated" {
				m.refuse(base+".mode", "deploy.mode: %v cannot be honoured: a service runs the number of instances deploy.replicas says (1 by default), also on a swarm, where they spread over the nodes (one per node when replicas equals the node count, and placement constraints choose the nodes); remove it, and set deploy.replicas instead", v)
			}
		case "placement":
			m.placement(name, v, out)
		case "resources":
		case "rollback_config":
			m.refuse(base+".rollback_config", "deploy.rollback_config cannot be honoured: a failed deploy keeps the old generation serving, with nothing to roll back; remove it (docker gordon rollback APP goes back to an earlier revision)")
		default:
			m.refuse(base+"."+k, "deploy.%s cannot be honoured (a swarm setting with no meaning on one engine); remove it", k)
		}
	}
	if svc.Deploy == nil {
		return
	}
	if r := svc.Deploy.Replicas; r != nil && *r != 1 {
		out.Replicas = *r
		m.from("services."+name+".replicas", base+".replicas")
	}
	if rp := svc.Deploy.RestartPolicy; rp != nil {
		rpRaw, _ := dep["restart_policy"].(map[string]any)
		for k := range rpRaw {
			if k != "condition" {
				m.refuse(base+".restart_policy."+k, "deploy.restart_policy.%s cannot be honoured: reconcile restarts a crashed container with its own crash-loop budget; remove it", k)
			}
		}
		if rp.Condition == "none" {
			m.refuse(base+".restart_policy.condition", "condition: none cannot be honoured: docker gordon keeps every service running; remove it")
		}
	}
	uc := svc.Deploy.UpdateConfig
	if uc == nil {
		return
	}
	ucRaw, _ := dep["update_config"].(map[string]any)
	for k := range ucRaw {
		switch k {
		case "order", "failure_action":
		case "parallelism":
			if p := uc.Parallelism; p != nil && *p > 1 {
				m.refuse(base+".update_config.parallelism", "parallelism %d cannot be honoured: a service's instances are replaced as one set (all new instances ready, then one switch); remove it", *p)
			}
		default:
			m.refuse(base+".update_config."+k, "deploy.update_config.%s cannot be honoured: the new generation is switched to as soon as its readiness passes; remove it (a readiness timeout is x-gordon.readiness.timeout)", k)
		}
	}
	switch uc.Order {
	case "":
	case "start-first":
		out.Replace = "overlap"
		m.from("services."+name+".replace", base+".update_config.order")
	case "stop-first":
		out.Replace = "sequential"
		m.from("services."+name+".replace", base+".update_config.order")
	default:
		m.refuse(base+".update_config.order", "order %q: want start-first (overlap) or stop-first (sequential)", uc.Order)
	}
	switch uc.FailureAction {
	case "", "rollback", "pause":
		if uc.FailureAction == "rollback" {
			m.note("%s: failure_action: rollback is the default: a new generation that fails readiness is removed and the old one keeps serving", name)
		}
	default:
		m.refuse(base+".update_config.failure_action", "failure_action: %s cannot be honoured: a failed service stops the deploy and its old generation keeps serving; use rollback (the default) or remove it", uc.FailureAction)
	}
}

// placement maps deploy.placement.constraints onto placement (honoured on
// a swarm, noted as ignored on one engine); preferences and
// max_replicas_per_node are refused.
func (m *mapper) placement(name string, v any, out *service) {
	base := "services." + name + ".deploy.placement"
	pl, _ := v.(map[string]any)
	for k, raw := range pl {
		switch k {
		case "constraints":
			list, _ := raw.([]any)
			for _, c := range list {
				if s, ok := c.(string); ok {
					out.Placement = append(out.Placement, s)
				}
			}
			m.from("services."+name+".placement", base+".constraints")
		case "preferences":
			m.refuse(base+".preferences", "deploy.placement.preferences cannot be honoured: the instances of a service spread over the nodes by themselves; remove it")
		default:
			m.refuse(base+"."+k, "deploy.placement.%s cannot be honoured: use placement constraints, or deploy.replicas; remove it", k)
		}
	}
	if len(out.Placement) > 0 {
		m.note("%s: placement constraints are honoured on a swarm; one engine has one node and ignores them", name)
	}
}
