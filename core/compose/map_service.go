package compose

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

// acceptedKeys are the compose service keys that are mapped (below) or
// need no mapping. A key in none of acceptedKeys, containerKeys and
// refusedReasons is refused as not supported.
var acceptedKeys = map[string]bool{
	// mapped below
	"image": true, "build": true, "environment": true, "env_file": true, "stop_grace_period": true,
	"ports": true, "expose": true, "volumes": true, "secrets": true, "configs": true, "labels": true, "deploy": true,
	"networks": true, "restart": true, "container_name": true, "devices": true, "privileged": true,
	"hostname": true, "pull_policy": true, "scale": true, "network_mode": true, "pid": true, "ipc": true,
	"links": true, "external_links": true, "post_start": true, "pre_stop": true, "stdin_open": true, "tty": true,
	// resolved by the loader, or not a property of the running container
	"profiles": true, "extends": true, "develop": true, "attach": true, "label_file": true,
}

// containerKeys are the container keys, mapped by container() onto the
// manifest keys of the same names.
var containerKeys = map[string]bool{
	"command": true, "entrypoint": true, "stop_signal": true, "healthcheck": true, "depends_on": true,
	"user": true, "working_dir": true, "init": true, "read_only": true, "shm_size": true, "tmpfs": true,
	"ulimits": true, "cap_add": true, "cap_drop": true, "sysctls": true, "extra_hosts": true,
	"logging": true, "log_driver": true, "log_opt": true, "mem_limit": true, "cpus": true, "pids_limit": true,
}

// refusedReasons say why a service key cannot be honoured and what to do.
var refusedReasons = map[string]string{
	"volumes_from":   "not supported: each service declares its own volumes (a named volume under volumes:)",
	"dns":            "not supported yet: the container uses Docker's embedded DNS on the app network",
	"dns_search":     "not supported yet: the container uses Docker's embedded DNS on the app network",
	"dns_opt":        "not supported yet: the container uses Docker's embedded DNS on the app network",
	"mac_address":    "not supported: two generations of a service may run at once and cannot share a MAC address",
	"userns_mode":    "not supported: the container runs in the engine's default user namespace",
	"security_opt":   "not supported yet: security options are not passed to the container",
	"platform":       "not supported: the image is run for the engine's platform; pin a platform-specific image instead",
	"runtime":        "not supported: containers use the engine's default runtime",
	"gpus":           "not supported yet: the container is created without device requests, so the program would find no GPU; run it with docker run --gpus, or keep it in a compose deployment of its own",
	"cgroup_parent":  "not supported: containers use the engine's cgroup parent",
	"group_add":      "not supported yet: supplementary groups",
	"oom_score_adj":  "not supported yet: oom_score_adj",
	"use_api_socket": "not supported: the Docker API socket is not given to services",
}

// service maps one compose service.
func (m *mapper) service(name string, svc *types.ServiceConfig) *service {
	base := "services." + name
	out := &service{Env: map[string]string{}}
	raw := m.modelService(name)
	keys := slices.Sorted(maps.Keys(raw))
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, "x-"), acceptedKeys[k], containerKeys[k]:
		case refusedReasons[k] != "":
			m.refuse(base+"."+k, "%s", refusedReasons[k])
		default:
			m.refuse(base+"."+k, "not supported: docker gordon cannot honour %s; remove it (docs/compose.md lists what is mapped and refused)", k)
		}
	}

	// image / build: a service with build is built before its revision
	// is stored, and tagged with image when it names one.
	if svc.Image == "" && svc.Build == nil {
		m.refuse(base, "image is required (or build)")
	}
	out.Image = svc.Image
	out.Build = m.buildOf(name, svc, raw)
	m.from(base+".image", base+".image")
	if m.jobs[name] {
		out.Run = "once"
		m.from(base+".run", base)
		m.note("%s: a one-shot (another service waits for it to complete): each deploy runs it to completion first, then removes it", name)
	}

	m.refusals(name, svc, out)
	m.environment(name, svc, out)
	if svc.StopGracePeriod != nil {
		out.StopGrace = manifest.FormatDuration(time.Duration(*svc.StopGracePeriod))
		m.from(base+".stop_grace", base+".stop_grace_period")
	}
	m.deploy(name, svc, raw, out)
	m.scale(name, svc, out)
	m.volumes(name, svc, out)
	m.secretsOf(name, svc, out)
	m.configsOf(name, svc, out)
	m.devices(name, svc, out)
	m.networks(name, svc, out)
	m.interfaces(name, svc, out) // before container: x-gordon readiness wins over the healthcheck's
	m.container(name, svc, raw, out)
	m.lifecycleHooks(name, svc, out)
	if len(out.Env) == 0 {
		out.Env = nil
	}
	return out
}

// refusals checks the keys whose value decides whether they can be
// honoured.
func (m *mapper) refusals(name string, svc *types.ServiceConfig, out *service) {
	base := "services." + name
	if svc.NetworkMode != "" {
		switch {
		case svc.NetworkMode == "host":
			m.refuse(base+".network_mode", "network_mode: host cannot be honoured: the edge routes to services on the app network, and two generations on the host network would fight over the same ports; remove it and publish what must be reached with ports:")
		default:
			m.refuse(base+".network_mode", "network_mode: %s cannot be honoured: every service joins the app network gordon-<app>; remove it", svc.NetworkMode)
		}
	}
	if svc.Privileged {
		m.refuse(base+".privileged", "privileged cannot be honoured: docker gordon does not run privileged containers; remove it and grant only what the program needs (cap_add, devices: the operator approves those beyond Docker's defaults under [privileges.<app>] in config.toml)")
	}
	if svc.Pid != "" {
		m.refuse(base+".pid", "pid: %s cannot be honoured: each container has its own PID namespace; remove it", svc.Pid)
	}
	if svc.Ipc != "" && svc.Ipc != "private" {
		m.refuse(base+".ipc", "ipc: %s cannot be honoured: each container has its own IPC namespace; remove it (or use ipc: private)", svc.Ipc)
	}
	if len(svc.Links) > 0 {
		m.refuse(base+".links", "links cannot be honoured (and are not needed): services reach each other by service name on the app network; remove links, and use depends_on for start order")
	}
	if len(svc.ExternalLinks) > 0 {
		m.refuse(base+".external_links", "external_links cannot be honoured: join a shared external network instead (networks: NAME: external: true)")
	}
	if svc.Hostname != "" && svc.Hostname != name {
		m.refuse(base+".hostname", "hostname %q cannot be honoured: a container's hostname is its service name (%s), or %s-N for instance N when the service runs several; remove hostname", svc.Hostname, name, name)
	}
	switch svc.PullPolicy {
	case "", types.PullPolicyMissing, types.PullPolicyIfNotPresent:
	case types.PullPolicyAlways:
		m.refuse(base+".pull_policy", "pull_policy: always is chosen per deploy in docker gordon: remove it and run deploy --pull always")
	default:
		m.refuse(base+".pull_policy", "pull_policy: %s cannot be honoured: docker gordon pulls missing images (deploy --pull always|missing|never); remove it", svc.PullPolicy)
	}
	switch {
	case m.jobs[name]:
		if svc.Restart != "" && svc.Restart != types.RestartPolicyNo {
			m.refuse(base+".restart", "restart: %s cannot be honoured on %s, a one-shot another service waits for (service_completed_successfully): it runs once per deploy; remove restart or use \"no\"", svc.Restart, name)
		}
	case svc.Restart == "", svc.Restart == types.RestartPolicyAlways, svc.Restart == types.RestartPolicyUnlessStopped, svc.Restart == types.RestartPolicyOnFailure:
	case svc.Restart == types.RestartPolicyNo:
		m.refuse(base+".restart", `restart: "no" cannot be honoured: docker gordon keeps every service running (reconcile restarts a crashed container); remove it (a one-shot job is not a service)`)
	case !strings.HasPrefix(svc.Restart, types.RestartPolicyOnFailure+":"):
		m.refuse(base+".restart", "restart: %s: want always, unless-stopped or on-failure", svc.Restart)
	}
	if svc.ContainerName != "" {
		m.containerName(name, svc, out)
	}
	if svc.StdinOpen || svc.Tty {
		m.note("%s: stdin_open and tty have no effect: services run detached, with no terminal attached (docker gordon exec -it opens one)", name)
	}
}

// containerName: a fixed container name becomes a network alias, so
// other services (and the program's own configuration) reach the service
// by it on the app network; the container itself keeps docker gordon's
// per-generation name, so two generations can overlap.
func (m *mapper) containerName(name string, svc *types.ServiceConfig, out *service) {
	if svc.ContainerName == name {
		m.note("%s: container_name %s is the service name, which other services reach it by; the container itself is named per generation", name, svc.ContainerName)
		return
	}
	out.Aliases = appendNew(out.Aliases, svc.ContainerName)
	m.from(fmt.Sprintf("services.%s.aliases[%d]", name, len(out.Aliases)-1), "services."+name+".container_name")
	m.note("%s: container_name %s is an alias on the app network (other services reach it by that name); the container itself is named per generation", name, svc.ContainerName)
}

// appendNew appends v to list unless it is there.
func appendNew(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// environment: environment and env_file (resolved by the loader); a
// variable without a value that is unset stays unset, as in compose.
func (m *mapper) environment(name string, svc *types.ServiceConfig, out *service) {
	for k, v := range svc.Environment {
		if v == nil {
			continue
		}
		out.Env[k] = *v
		m.from("services."+name+".env."+k, "services."+name+".environment")
	}
}

// scale maps scale: N to replicas as deploy.replicas (compose-go refuses
// the two when they disagree), keeping scale as the key errors point at.
func (m *mapper) scale(name string, svc *types.ServiceConfig, out *service) {
	if svc.Scale == nil || *svc.Scale == 1 {
		return
	}
	out.Replicas = *svc.Scale
	m.from("services."+name+".replicas", "services."+name+".scale")
}
