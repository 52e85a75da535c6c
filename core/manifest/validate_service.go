package manifest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"

	"github.com/gordon-deploy/docker-gordon/core"
)

// service validates one [services.<name>] table.
func (v *validator) service(name string, raw rawService, appEnv map[string]string) core.ServiceSpec {
	key := "services." + name
	svc := core.ServiceSpec{Name: name}
	switch {
	case !dnsLabelRE.MatchString(name):
		v.addf(key, "invalid service name %q: %s", name, dnsLabelRule)
	case strings.HasPrefix(name, SystemPrefix):
		v.addf(key, "service name %q is reserved: %s", name, reservedServiceRule)
	}
	svc.Build = v.build(key+".build", raw.Build, raw.Image)
	switch {
	case raw.Image == nil && raw.Build == nil:
		v.add(key+".image", `required: the image reference, e.g. "registry.example/blog:1.4" or "name@sha256:<64 hex digits>", or a [build] table`)
	case raw.Image == nil:
		// Built: the CLI sets Image to the build's tag before storing.
	default:
		if msg := checkImage(*raw.Image); msg != "" {
			v.add(key+".image", msg)
		} else {
			svc.Image = *raw.Image
		}
	}
	if raw.Command != nil {
		for i, a := range *raw.Command {
			if a == "" {
				v.addf(fmt.Sprintf("%s.command[%d]", key, i), "argument must be a non-empty string")
			}
		}
		svc.Command = append([]string{}, *raw.Command...)
	}
	svc.StopGrace = v.duration(key+".stop_grace", raw.StopGrace, minStopGrace, maxStopGrace)
	svc.Env = v.env(key+".env", raw.Env)
	svc.Secrets = v.secrets(key, raw.Secrets, svc.Env, appEnv)

	for _, list := range []string{"http", "tcp", "udp", "volume", "bind", "config"} {
		if v.idx.tables[key+"."+list] {
			v.addf(key+"."+list, "wrong type: want an array of tables, written [[%s.%s]], got a table", key, list)
		}
	}
	tcpPorts := map[int]string{} // container port/tcp -> key of its first declaration
	publicHTTP := map[int]bool{} // ports declared only by public HTTP interfaces so far
	udpPorts := map[int]string{}
	for i, h := range raw.HTTP {
		svc.HTTP = append(svc.HTTP, v.http(fmt.Sprintf("%s.http[%d]", key, i), h, tcpPorts, publicHTTP))
	}
	svc.TCP = v.l4(key, "tcp", raw.TCP, tcpPorts)
	svc.UDP = v.l4(key, "udp", raw.UDP, udpPorts)
	svc.Healthcheck = v.healthcheck(key+".healthcheck", raw.Healthcheck)
	svc.Readiness = v.readiness(key, raw.Readiness, &svc)

	mounts := map[string]string{} // container path -> key of its first mount
	for i, m := range raw.Volume {
		k := fmt.Sprintf("%s.volume[%d]", key, i)
		vm := v.mount(k, "volume", m, mounts)
		svc.Volumes = append(svc.Volumes, core.VolumeMount{Name: vm.Name, Path: vm.Path, ReadOnly: vm.ReadOnly, Adopt: m.Adopt != nil && *m.Adopt})
	}
	for i, m := range raw.Bind {
		k := fmt.Sprintf("%s.bind[%d]", key, i)
		if m.Adopt != nil {
			v.add(k+".adopt", "adopt applies to volumes only: a bind mounts an operator-approved host path")
		}
		svc.Binds = append(svc.Binds, v.mount(k, "bind", m, mounts))
	}
	for i, c := range raw.Config {
		if cf, ok := v.config(fmt.Sprintf("%s.config[%d]", key, i), c, mounts); ok {
			svc.Configs = append(svc.Configs, cf)
		}
	}
	svc.Devices = v.devices(key, raw.Devices)
	v.containerKeys(key, raw, &svc)
	svc.Replace = v.replace(key+".replace", raw.Replace, &svc)
	svc.Run = v.run(key, raw.Run, &svc)
	svc.Replicas = v.replicas(key+".replicas", raw.Replicas, &svc)
	svc.Node = v.node(key+".node", raw.Node)
	svc.Placement = v.placement(key+".placement", raw.Placement)
	svc.Aliases = v.aliases(key+".aliases", raw.Aliases)
	svc.Hooks = v.hooks(key+".hooks", raw.Hooks, &svc)
	svc.Monitor = v.monitor(key+".monitor", raw.Monitor, &svc)
	v.snapshots(key+".snapshots", raw.Snapshots, &svc)
	svc.SleepAfter, svc.WakeIgnore = v.sleep(key, raw.SleepAfter, raw.WakeIgnore, &svc)
	v.backup(key+".backup", raw.Backup, &svc)
	return svc
}

// replicas validates replicas = N (1..core.MaxReplicas): more than one
// instance needs a stateless service that keeps running, since two
// instances of a single-writer service would write its state at once.
func (v *validator) replicas(key string, raw *int, svc *core.ServiceSpec) int {
	if raw == nil {
		return 0
	}
	n := *raw
	if n < 1 || n > core.MaxReplicas {
		v.addf(key, "replicas = %d: want 1..%d instances", n, core.MaxReplicas)
		return 0
	}
	if n == 1 {
		return 0
	}
	if svc.Run == core.RunOnce {
		v.addf(key, "replicas = %d: a one-shot service (run = \"once\") runs one instance to completion; remove replicas", n)
		return 0
	}
	if why := core.NotOverlapEligible(svc); why != "" {
		v.addf(key, "replicas = %d: the service runs one instance (%s): two instances would share state or an exclusive resource, and a UDP session must stay on one instance; remove replicas, or move the state out of the service", n, why)
		return 0
	}
	return n
}

// aliasRE is a network alias: a DNS name of letters, digits, ".", "_"
// and "-" (compose container names such as "my_app_db" included).
var aliasRE = newLazyRE(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// aliases validates aliases = ["name", ...]: extra names of the service
// on the app network; duplicates are dropped.
func (v *validator) aliases(key string, raw []string) []string {
	var out []string
	for i, a := range raw {
		switch {
		case !aliasRE.MatchString(a):
			v.addf(fmt.Sprintf("%s[%d]", key, i), `invalid alias %q: want 1-63 letters, digits, ".", "_" or "-", starting with a letter or digit`, a)
		case !slices.Contains(out, a):
			out = append(out, a)
		}
	}
	return out
}

// nodeRE is a swarm node's hostname or ID: DNS-ish characters only.
var nodeRE = newLazyRE(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,252})$`)

// node validates node = "<hostname or node ID>": the node a service is
// pinned to on a swarm (its volumes, binds and devices live there); one
// engine ignores it.
func (v *validator) node(key string, raw *string) string {
	if raw == nil {
		return ""
	}
	if !nodeRE.MatchString(*raw) {
		v.addf(key, `invalid node %q: want a swarm node's hostname or ID (letters, digits, ".", "_", "-"), as docker node ls shows it`, *raw)
		return ""
	}
	return *raw
}

// run validates run = "once": a one-shot service runs to completion at
// each deploy, so it serves nothing and has nothing to wait for.
func (v *validator) run(key string, raw *string, svc *core.ServiceSpec) string {
	if raw == nil {
		return ""
	}
	if *raw != core.RunOnce {
		v.addf(key+".run", `invalid run %q: want "once" (a one-shot run to completion at each deploy), or omit run for a service kept running`, *raw)
		return ""
	}
	const why = "a one-shot service (run = \"once\") runs to completion and serves nothing"
	for _, list := range []struct {
		name string
		n    int
	}{{"http", len(svc.HTTP)}, {"tcp", len(svc.TCP)}, {"udp", len(svc.UDP)}} {
		if list.n > 0 {
			v.addf(key+"."+list.name, "%s: remove its %s interfaces", why, list.name)
		}
	}
	if svc.Readiness.Type != "" && svc.Readiness.Type != core.ReadinessNone {
		v.addf(key+".readiness", "%s: it is waited for until it exits (status 0); remove readiness", why)
	}
	if svc.Healthcheck.Enabled() {
		v.addf(key+".healthcheck", "%s: remove healthcheck", why)
	}
	if svc.Replace != "" {
		v.addf(key+".replace", "%s: it is never replaced; remove replace", why)
	}
	return *raw
}

// replace validates the declared replacement flow (SPEC R16): "overlap"
// needs an overlap-eligible service, "sequential" is always allowed.
func (v *validator) replace(key string, raw *string, svc *core.ServiceSpec) string {
	if raw == nil {
		return ""
	}
	switch *raw {
	case core.ReplaceSequential:
	case core.ReplaceOverlap:
		if why := core.NotOverlapEligible(svc); why != "" {
			v.addf(key, `replace = "overlap" cannot be honoured: the service is replaced sequentially (%s), so two generations never run at once; remove replace or use "sequential"`, why)
		}
	default:
		v.addf(key, `invalid replace %q: want "overlap" (start the new generation before stopping the old; stateless services only) or "sequential" (stop the old one first)`, *raw)
	}
	return *raw
}

// checkImage returns "" for a plausible Docker image reference, else a
// message.
func checkImage(ref string) string {
	const want = `want e.g. "nginx:1.27", "registry.example:5000/team/app:1.4" or "name@sha256:<64 hex digits>"`
	if ref == "" {
		return "must not be empty; " + want
	}
	if strings.ContainsFunc(ref, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Sprintf("invalid image reference %q: contains whitespace or control characters; %s", ref, want)
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		var why string
		switch {
		case errors.Is(err, reference.ErrNameContainsUppercase), strings.Contains(err.Error(), "must be lowercase"):
			why = "repository name must be lowercase"
		case errors.Is(err, reference.ErrNameTooLong):
			why = fmt.Sprintf("name longer than %d characters", reference.RepositoryNameTotalLengthMax)
		case errors.Is(err, reference.ErrDigestInvalidFormat), errors.Is(err, reference.ErrReferenceInvalidFormat), errors.Is(err, reference.ErrNameEmpty):
			why = "not of the form [registry[:port]/]name[:tag][@sha256:<64 hex digits>]"
		default:
			why = err.Error()
		}
		return fmt.Sprintf("invalid image reference %q: %s; %s", ref, why, want)
	}
	return ""
}
