package compose

import (
	"fmt"
	"net"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
)

// mapper converts one loaded project into a manifest doc, collecting every
// refusal instead of stopping at the first.
type mapper struct {
	p     *types.Project
	model map[string]any
	ps    *positions
	o     Options

	problems []Problem
	notes    []string
	secrets  []Secret
	// origin maps a manifest key ("services.web.replace") to the compose
	// key path it was mapped from, so a manifest rule the mapped project
	// breaks is reported at the compose file and line.
	origin map[string]string
	// networkNoted: the collapsing of compose networks was noted once.
	networkNoted bool
	// jobs are the services another one depends on with condition
	// service_completed_successfully: one-shots (run = "once").
	jobs map[string]bool
}

func newMapper(p *types.Project, model map[string]any, ps *positions, o Options) *mapper {
	jobs := map[string]bool{}
	for _, s := range p.Services {
		for d, dep := range s.DependsOn {
			if dep.Condition == types.ServiceConditionCompletedSuccessfully {
				jobs[d] = true
			}
		}
	}
	return &mapper{p: p, model: model, ps: ps, o: o, origin: map[string]string{}, jobs: jobs}
}

// refuse records a problem at the compose key path.
func (m *mapper) refuse(keyPath, format string, args ...any) {
	m.refuseAt(keyPath, "", fmt.Sprintf(format, args...))
}

// refuseAt records a problem at keyPath; item, when set, locates the
// element of the sequence at keyPath that starts with it.
func (m *mapper) refuseAt(keyPath, item, msg string) {
	var at location
	if item != "" {
		at = m.ps.locateItem(keyPath, item)
	} else {
		at = m.ps.locate(keyPath)
	}
	svc := ""
	if rest, ok := strings.CutPrefix(keyPath, "services."); ok {
		svc, _, _ = strings.Cut(rest, ".")
	}
	m.problems = append(m.problems, Problem{File: at.File, Line: at.Line, Column: at.Column, Service: svc, Key: keyPath, Message: msg})
}

func (m *mapper) note(format string, args ...any) {
	m.notes = append(m.notes, fmt.Sprintf(format, args...))
}

// fail returns the collected problems as one *Error.
func (m *mapper) fail(files []string) error {
	names := displayNames(files)
	sortProblems(names, m.problems)
	return &Error{Files: names, Problems: m.problems}
}

// from records that manifest key tomlKey comes from compose key keyPath.
func (m *mapper) from(tomlKey, keyPath string) {
	m.origin[tomlKey] = keyPath
}

// originOf returns the compose key path a manifest key was mapped from:
// the longest recorded prefix of tomlKey, else the service, else "name".
func (m *mapper) originOf(tomlKey string) string {
	if p, ok := m.origin[tomlKey+"[0]"]; ok {
		return p // a whole list: where its first element came from
	}
	for k := tomlKey; k != ""; k = parentPath(k) {
		if p, ok := m.origin[k]; ok {
			return p
		}
	}
	return "name"
}

// modelService returns the user-written keys of service name.
func (m *mapper) modelService(name string) map[string]any {
	svcs, _ := m.model["services"].(map[string]any)
	s, _ := svcs[name].(map[string]any)
	return s
}

func (m *mapper) run() *doc {
	d := &doc{Name: m.p.Name, Services: map[string]*service{}}
	if _, ok := m.model["name"]; ok {
		m.from("name", "name")
	}
	m.topLevel(d)
	names := make([]string, 0, len(m.p.Services))
	for name := range m.p.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		svc := m.p.Services[name]
		out := m.service(name, &svc)
		d.Services[name] = out
		m.from("services."+name, "services."+name)
	}
	if len(d.Services) == 0 {
		m.refuse("services", "no service to deploy (profiles select none, or the project declares none): enable one with --profile")
	}
	return d
}

// topLevel checks the project-wide keys: volumes, networks, secrets,
// configs.
func (m *mapper) topLevel(d *doc) {
	for k, v := range m.model {
		switch {
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
			m.refuse("configs", "not supported yet: configs; deliver the file as a secret (secrets: NAME: file: PATH, mounted at /run/secrets/NAME) or through an approved bind")
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
	sort.Strings(shared)
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

// httpLikePorts are container ports that usually serve HTTP.
var httpLikePorts = map[int]bool{80: true, 3000: true, 5000: true, 8000: true, 8080: true, 8888: true}

// serviceKeys says what happens to each compose service key. Keys not
// listed are refused as not supported.
var acceptedKeys = map[string]bool{
	// mapped below
	"image": true, "build": true, "environment": true, "env_file": true, "stop_grace_period": true,
	"ports": true, "expose": true, "volumes": true, "secrets": true, "labels": true, "deploy": true,
	"networks": true, "restart": true, "container_name": true, "devices": true, "privileged": true,
	"hostname": true, "pull_policy": true, "scale": true, "network_mode": true, "pid": true, "ipc": true,
	"links": true, "external_links": true,
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
	"configs":        "not supported yet: configs; deliver the file as a secret (mounted at /run/secrets/NAME) or through an approved bind",
	"platform":       "not supported: the image is run for the engine's platform; pin a platform-specific image instead",
	"runtime":        "not supported: containers use the engine's default runtime",
	"stdin_open":     "not supported: services run detached with no stdin",
	"tty":            "not supported: services run detached with no terminal",
	"gpus":           "not supported yet: GPU requests",
	"post_start":     "not supported: lifecycle hooks; run the command in the entrypoint",
	"pre_stop":       "not supported: lifecycle hooks; handle the stop signal in the program",
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
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, "x-"), acceptedKeys[k], containerKeys[k]:
		case refusedReasons[k] != "":
			m.refuse(base+"."+k, "%s", refusedReasons[k])
		default:
			m.refuse(base+"."+k, "not supported: docker gordon cannot honour %s; remove it (docs/compose.md lists what is mapped and refused)", k)
		}
	}

	// image / build
	switch {
	case svc.Image == "" && svc.Build != nil:
		m.refuse(base+".build", "build without image: docker gordon deploys images and does not build them; build it (docker build -t NAME .) and set image: NAME")
	case svc.Image == "":
		m.refuse(base, "image is required")
	}
	out.Image = svc.Image
	m.from(base+".image", base+".image")
	if m.jobs[name] {
		out.Run = "once"
		m.from(base+".run", base)
		m.note("%s: a one-shot (another service waits for it to complete): each deploy runs it to completion first, then removes it", name)
	}
	if svc.Build != nil && svc.Image != "" {
		m.note("%s: build is not run: docker gordon deploys the image %s as it exists locally (or pulls it)", name, svc.Image)
	}

	m.refusals(name, svc, raw)
	m.environment(name, svc, out)
	if svc.StopGracePeriod != nil {
		out.StopGrace = fmtDuration(time.Duration(*svc.StopGracePeriod))
		m.from(base+".stop_grace", base+".stop_grace_period")
	}
	m.deploy(name, svc, raw, out)
	m.volumes(name, svc, out)
	m.secretsOf(name, svc, out)
	m.devices(name, svc, out)
	m.networks(name, svc)
	m.interfaces(name, svc, out) // before container: x-gordon readiness wins over the healthcheck's
	m.container(name, svc, raw, out)
	if len(out.Env) == 0 {
		out.Env = nil
	}
	return out
}

// refusals checks the keys whose value decides whether they can be
// honoured.
func (m *mapper) refusals(name string, svc *types.ServiceConfig, raw map[string]any) {
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
		m.refuse(base+".privileged", "privileged cannot be honoured: docker gordon does not run privileged containers; remove it and grant only what the program needs (cap_add, devices)")
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
		m.refuse(base+".hostname", "hostname %q cannot be honoured: a container's hostname is its service name (%s); remove hostname", svc.Hostname, name)
	}
	switch svc.PullPolicy {
	case "", types.PullPolicyMissing, types.PullPolicyIfNotPresent:
	case types.PullPolicyAlways:
		m.refuse(base+".pull_policy", "pull_policy: always is chosen per deploy in docker gordon: remove it and run deploy --pull always")
	default:
		m.refuse(base+".pull_policy", "pull_policy: %s cannot be honoured: docker gordon pulls missing images (deploy --pull always|missing|never); remove it", svc.PullPolicy)
	}
	if svc.Scale != nil && *svc.Scale != 1 {
		m.refuse(base+".scale", "scale: %d cannot be honoured: a service runs one container (replicas are not supported yet); remove it", *svc.Scale)
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
		m.containerName(name, svc)
	}
}

// containerName: a fixed container name collides with the next generation
// (overlap) and with docker gordon's per-generation names.
func (m *mapper) containerName(name string, svc *types.ServiceConfig) {
	key := "services." + name + ".container_name"
	if m.overlapCandidate(svc) {
		m.refuse(key, "container_name cannot be honoured on %s, which is replaced with an overlap: two generations run side by side and cannot share one name; remove it (other services reach it as %s on the app network)", name, name)
		return
	}
	if svc.ContainerName != name {
		m.refuse(key, "container_name %q cannot be honoured: docker gordon names each generation gordon-<app>-%s-<op>; remove it (other services reach it as %s on the app network)", svc.ContainerName, name, name)
		return
	}
	m.note("%s: container_name %s is the service name, which other services reach it by; the container itself is named per generation", name, svc.ContainerName)
}

// overlapCandidate reports whether svc maps to an overlap-eligible service
// not declared stop-first (SPEC R16).
func (m *mapper) overlapCandidate(svc *types.ServiceConfig) bool {
	if svc.Deploy != nil && svc.Deploy.UpdateConfig != nil && svc.Deploy.UpdateConfig.Order == "stop-first" {
		return false
	}
	for _, v := range svc.Volumes {
		if v.Type == types.VolumeTypeVolume || v.Type == types.VolumeTypeBind {
			return false
		}
	}
	if len(svc.Devices) > 0 {
		return false
	}
	for _, p := range svc.Ports {
		if p.Protocol == "udp" {
			return false
		}
	}
	return true
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

// deploy maps deploy: update_config.order → replace, replicas, limits.
func (m *mapper) deploy(name string, svc *types.ServiceConfig, raw map[string]any, out *service) {
	base := "services." + name + ".deploy"
	dep, _ := raw["deploy"].(map[string]any)
	for k, v := range dep {
		switch k {
		case "replicas", "update_config", "restart_policy":
		case "mode":
			if s, _ := v.(string); s != "replicated" {
				m.refuse(base+".mode", "deploy.mode: %v cannot be honoured: a service runs one container on this engine; remove it", v)
			}
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
		m.refuse(base+".replicas", "deploy.replicas: %d cannot be honoured: a service runs one container until replicas exist; set 1 or remove it", *r)
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
				m.refuse(base+".update_config.parallelism", "parallelism %d cannot be honoured: one container per service is replaced at a time; remove it", *p)
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

// volumes: named volume → [[volume]], bind → approved [[bind]].
func (m *mapper) volumes(name string, svc *types.ServiceConfig, out *service) {
	base := "services." + name + ".volumes"
	for i, v := range svc.Volumes {
		key := fmt.Sprintf("%s[%d]", base, i)
		if !m.ps.has(key) {
			key = base
		}
		switch v.Type {
		case types.VolumeTypeVolume:
			if v.Source == "" {
				m.refuse(key, "anonymous volume at %s cannot be honoured: it would be a new empty volume for every generation; name it (NAME:%s, declared under top-level volumes:)", v.Target, v.Target)
				continue
			}
			if v.Volume != nil && (v.Volume.NoCopy || v.Volume.Subpath != "") {
				m.refuse(key, "volume options (nocopy, subpath) are not supported yet; remove them")
			}
			out.Volume = append(out.Volume, mount{Name: v.Source, Path: v.Target, ReadOnly: v.ReadOnly})
			m.from(fmt.Sprintf("services.%s.volume[%d]", name, len(out.Volume)-1), key)
		case types.VolumeTypeBind:
			if v.Bind != nil && (v.Bind.Propagation != "" || v.Bind.SELinux != "" || v.Bind.Recursive != "") {
				m.refuse(key, "bind options (propagation, selinux, recursive) are not supported yet; remove them")
			}
			src := path.Clean(v.Source)
			if m.o.BindName == nil {
				m.refuse(key, "bind %s cannot be honoured: no bind policy is available", m.shown(src))
				continue
			}
			bn, err := m.o.BindName(src)
			if err != nil {
				m.refuse(key, "bind %s → %s: %v", m.shown(src), v.Target, err)
				continue
			}
			out.Bind = append(out.Bind, mount{Name: bn, Path: v.Target, ReadOnly: v.ReadOnly})
			m.from(fmt.Sprintf("services.%s.bind[%d]", name, len(out.Bind)-1), key)
		case types.VolumeTypeTmpfs:
			out.Tmpfs = append(out.Tmpfs, tmpfsOf(v))
			m.from("services."+name+".tmpfs", key)
		default:
			m.refuse(key, "a %s mount cannot be honoured: use a named volume or an approved bind", v.Type)
		}
	}
}

// secretsOf: a service secret → a file secret at /run/secrets/TARGET.
func (m *mapper) secretsOf(name string, svc *types.ServiceConfig, out *service) {
	base := "services." + name + ".secrets"
	for i, s := range svc.Secrets {
		key := fmt.Sprintf("%s[%d]", base, i)
		if !m.ps.has(key) {
			key = base
		}
		target := s.Target
		if target == "" {
			target = s.Source
		}
		if strings.HasPrefix(target, "/") {
			dir, file := path.Split(path.Clean(target))
			if dir != "/run/secrets/" {
				m.refuse(key, "secret target %s cannot be honoured: secrets are mounted at /run/secrets/NAME; give target: NAME", target)
				continue
			}
			target = file
		}
		if s.UID != "" || s.GID != "" || s.Mode != nil {
			m.refuse(key, "secret uid, gid and mode are not supported yet: the file is mounted read-only, owned by root; remove them")
		}
		def, ok := m.p.Secrets[s.Source]
		if !ok {
			m.refuse(key, "secret %s is not declared under top-level secrets:", s.Source)
			continue
		}
		if out.Secrets == nil {
			out.Secrets = map[string]secretRef{}
		}
		out.Secrets[target] = secretRef{Name: s.Source, As: "file"}
		m.from("services."+name+".secrets."+target, key)
		switch {
		case bool(def.External):
			m.note("%s: secret %s is external: set it with docker gordon secrets set %s %s %s", name, s.Source, m.p.Name, name, s.Source)
		case def.File != "":
			m.secrets = append(m.secrets, Secret{Service: name, Name: s.Source, File: def.File})
		case def.Environment != "":
			m.secrets = append(m.secrets, Secret{Service: name, Name: s.Source, Env: def.Environment, environ: m.p.Environment})
		default:
			m.refuse("secrets."+s.Source, "secret %s has no source: give file: PATH, environment: VAR or external: true", s.Source)
		}
	}
}

// devices: HOST:CONTAINER with the same path and default permissions.
func (m *mapper) devices(name string, svc *types.ServiceConfig, out *service) {
	for i, d := range svc.Devices {
		key := fmt.Sprintf("services.%s.devices[%d]", name, i)
		if !m.ps.has(key) {
			key = "services." + name + ".devices"
		}
		if d.Target != "" && d.Target != d.Source || d.Permissions != "" && d.Permissions != "rwm" {
			m.refuse(key, "device %s:%s:%s cannot be honoured: a device is mounted at its host path with rwm; write %s", d.Source, d.Target, d.Permissions, d.Source)
			continue
		}
		out.Devices = append(out.Devices, d.Source)
		m.from(fmt.Sprintf("services.%s.devices[%d]", name, len(out.Devices)-1), key)
	}
}

// networks: project networks collapse into the app network; external ones
// are the app's shared networks, which every service joins.
func (m *mapper) networks(name string, svc *types.ServiceConfig) {
	base := "services." + name + ".networks"
	for net, cfg := range svc.Networks {
		if cfg != nil && (len(cfg.Aliases) > 0 || cfg.Ipv4Address != "" || cfg.Ipv6Address != "" || cfg.MacAddress != "" || len(cfg.LinkLocalIPs) > 0 || len(cfg.DriverOpts) > 0 || cfg.InterfaceName != "") {
			m.refuse(base+"."+net, "network options (aliases, addresses, driver_opts) cannot be honoured: a service is reached by its name on the app network; remove them")
		}
		def, ok := m.p.Networks[net]
		if ok && bool(def.External) {
			continue
		}
		if net != "default" && !m.networkNoted {
			m.networkNoted = true
			m.note("networks: every service joins the app network gordon-%s; the project networks (%s, ...) are not kept apart", m.p.Name, net)
		}
	}
	for net, def := range m.p.Networks {
		if !bool(def.External) {
			continue
		}
		if _, joined := svc.Networks[net]; !joined {
			m.note("%s: joins the external network %s too (shared networks are app-wide)", name, net)
		}
	}
}

// interfaces: routes (x-gordon, Traefik labels, VIRTUAL_HOST) become HTTP
// interfaces; other ports: become TCP/UDP interfaces published by the edge.
func (m *mapper) interfaces(name string, svc *types.ServiceConfig, out *service) {
	base := "services." + name
	routes := m.routes(name, svc, out)
	sort.SliceStable(routes, func(i, j int) bool { return routes[i].port < routes[j].port })
	routed := map[int]string{} // container port -> its first host
	seen := map[string]bool{}
	for _, r := range routes {
		if seen[r.host] {
			continue // the same host from two sources (x-gordon and a label)
		}
		seen[r.host] = true
		if _, ok := routed[r.port]; !ok {
			routed[r.port] = r.host
		}
		out.HTTP = append(out.HTTP, httpIface{Port: r.port, Host: r.host, TLS: r.tls})
		m.from(fmt.Sprintf("%s.http[%d]", base, len(out.HTTP)-1), r.origin)
	}
	for i, pc := range svc.Ports {
		key := fmt.Sprintf("%s.ports[%d]", base, i)
		if !m.ps.has(key) {
			key = base + ".ports"
		}
		proto := pc.Protocol
		if proto == "" {
			proto = "tcp"
		}
		if host, ok := routed[int(pc.Target)]; ok && proto == "tcp" {
			if pc.Published != "" {
				m.note("%s: port %s:%d is served by the edge as http://%s (the host port is not published)", name, pc.Published, pc.Target, host)
			}
			continue
		}
		if proto != "tcp" && proto != "udp" {
			m.refuse(key, "protocol %s cannot be honoured: the edge relays tcp and udp", proto)
			continue
		}
		if pc.Published == "" {
			m.refuse(key, "port %d has no host port: compose would publish a random one; write \"HOST:%d\" to publish it through the edge, or drop it (other services reach %s:%d on the app network)", pc.Target, pc.Target, name, pc.Target)
			continue
		}
		pub, err := strconv.Atoi(pc.Published)
		if err != nil {
			m.refuse(key, "host port %q cannot be honoured: publish one port per entry (no ranges)", pc.Published)
			continue
		}
		ip := pc.HostIP
		if ip == "" {
			ip = "0.0.0.0"
		}
		addr := net.JoinHostPort(ip, strconv.Itoa(pub))
		iface := l4Iface{Port: int(pc.Target), Publish: addr}
		if proto == "udp" {
			out.UDP = append(out.UDP, iface)
			m.from(fmt.Sprintf("%s.udp[%d]", base, len(out.UDP)-1), key)
		} else {
			out.TCP = append(out.TCP, iface)
			m.from(fmt.Sprintf("%s.tcp[%d]", base, len(out.TCP)-1), key)
			if len(routes) == 0 && httpLikePorts[int(pc.Target)] {
				m.note("%s: port %d is relayed as raw TCP on %s; to route it by host through the edge's HTTP, set x-gordon.host", name, pc.Target, addr)
			}
		}
	}
}

// shown writes a host path under the project directory as the user did
// ("./public"), any other as it is.
func (m *mapper) shown(p string) string {
	if rel, err := filepath.Rel(m.p.WorkingDir, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel) {
		return "./" + rel
	}
	return p
}

// fmtDuration writes d as the manifest does: "1m" rather than "1m0s".
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
