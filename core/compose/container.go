package compose

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

// Readiness budget bounds (R35) for a healthcheck's docker readiness.
const (
	defaultReadiness = 30 * time.Second
	maxReadiness     = 10 * time.Minute
	// Docker's healthcheck defaults.
	dockerHealthInterval = 30 * time.Second
	dockerHealthTimeout  = 30 * time.Second
	dockerHealthRetries  = 3
)

// container maps the container keys (compose's names are the manifest's).
func (m *mapper) container(name string, svc *types.ServiceConfig, raw map[string]any, out *service) {
	base := "services." + name
	tk := func(k string) string { return base + "." + k }
	if svc.Entrypoint != nil {
		e := []string(svc.Entrypoint)
		out.Entrypoint = &e
		m.from(tk("entrypoint"), base+".entrypoint")
	}
	if svc.Command != nil {
		c := []string(svc.Command)
		out.Command = &c
		m.from(tk("command"), base+".command")
	}
	if svc.StopSignal != "" {
		out.StopSignal = svc.StopSignal
		m.from(tk("stop_signal"), base+".stop_signal")
	}
	out.User = svc.User
	m.from(tk("user"), base+".user")
	out.WorkingDir = svc.WorkingDir
	m.from(tk("working_dir"), base+".working_dir")
	if svc.Init != nil {
		out.Init = svc.Init
		m.from(tk("init"), base+".init")
	}
	out.ReadOnly = svc.ReadOnly
	m.from(tk("read_only"), base+".read_only")
	out.ShmSize = int64(svc.ShmSize)
	m.from(tk("shm_size"), base+".shm_size")
	for _, t := range svc.Tmpfs {
		out.Tmpfs = append(out.Tmpfs, t)
	}
	m.from(tk("tmpfs"), base+".tmpfs")
	out.CapAdd = svc.CapAdd
	m.from(tk("cap_add"), base+".cap_add")
	out.CapDrop = svc.CapDrop
	m.from(tk("cap_drop"), base+".cap_drop")
	if len(svc.Sysctls) > 0 {
		out.Sysctls = map[string]string(svc.Sysctls)
		m.from(tk("sysctls"), base+".sysctls")
	}
	if len(svc.ExtraHosts) > 0 {
		hosts := slices.Sorted(maps.Keys(svc.ExtraHosts))
		for _, h := range hosts {
			for _, ip := range svc.ExtraHosts[h] {
				out.ExtraHosts = append(out.ExtraHosts, h+"="+ip)
			}
		}
		m.from(tk("extra_hosts"), base+".extra_hosts")
	}
	if len(svc.Ulimits) > 0 {
		out.Ulimits = map[string]any{}
		for n, u := range svc.Ulimits {
			if u == nil {
				continue
			}
			if u.Single != 0 {
				out.Ulimits[n] = u.Single
			} else {
				out.Ulimits[n] = map[string]int{"soft": u.Soft, "hard": u.Hard}
			}
			m.from(tk("ulimits."+n), base+".ulimits."+n)
		}
	}
	if len(svc.Labels) > 0 {
		out.Labels = map[string]string(svc.Labels)
		for k := range svc.Labels {
			m.from(tk("labels."+k), base+".labels")
		}
	}
	m.logging(name, svc, out)
	m.resources(name, svc, raw, out)
	m.healthcheck(name, svc, raw, out)
	m.dependsOn(name, svc, raw, out)
}

func (m *mapper) logging(name string, svc *types.ServiceConfig, out *service) {
	base := "services." + name
	driver, opts := svc.LogDriver, svc.LogOpt
	if svc.Logging != nil {
		driver, opts = svc.Logging.Driver, svc.Logging.Options
		m.from(base+".logging", base+".logging")
	} else if driver != "" || len(opts) > 0 {
		m.from(base+".logging", base+".log_driver")
	}
	if driver == "" && len(opts) == 0 {
		return
	}
	out.Logging = &logging{Driver: driver, Options: opts}
}

// resources: deploy.resources.limits and the legacy mem_limit, cpus,
// pids_limit keys.
func (m *mapper) resources(name string, svc *types.ServiceConfig, raw map[string]any, out *service) {
	base := "services." + name
	r := resources{Memory: int64(svc.MemLimit), CPUs: float64(svc.CPUS), Pids: svc.PidsLimit}
	for _, k := range []string{"mem_limit", "cpus", "pids_limit"} {
		if _, ok := raw[k]; ok {
			m.from(base+".resources", base+"."+k)
		}
	}
	dep, _ := raw["deploy"].(map[string]any)
	res, _ := dep["resources"].(map[string]any)
	for k := range res {
		switch {
		case k == "limits":
		case k == "reservations" && hasDeviceReservation(res[k]):
			m.refuse(base+".deploy.resources.reservations", "deploy.resources.reservations.devices (GPUs and other device requests) cannot be honoured yet: the container is created without device requests, so the program would find no GPU; run it with docker run --gpus, or keep it in a compose deployment of its own")
		default:
			m.refuse(base+".deploy.resources."+k, "deploy.resources.%s cannot be honoured: only limits are set on the container (reservations are scheduling hints for a swarm); remove it", k)
		}
	}
	lim, _ := res["limits"].(map[string]any)
	for k := range lim {
		switch k {
		case "cpus", "memory", "pids":
			m.from(base+".resources."+k, base+".deploy.resources.limits."+k)
		default:
			m.refuse(base+".deploy.resources.limits."+k, "deploy.resources.limits.%s cannot be honoured: limits are cpus, memory and pids; remove it", k)
		}
	}
	if svc.Deploy != nil && svc.Deploy.Resources.Limits != nil {
		l := svc.Deploy.Resources.Limits
		if l.MemoryBytes != 0 {
			r.Memory = int64(l.MemoryBytes)
		}
		if l.NanoCPUs != 0 {
			r.CPUs = float64(l.NanoCPUs)
		}
		if l.Pids != 0 {
			r.Pids = l.Pids
		}
	}
	if r != (resources{}) {
		out.Resources = &r
	}
}

// healthcheck sets Docker's healthcheck on the container and, unless
// x-gordon declares a readiness, waits for it (readiness type "docker",
// with a budget that covers the start period and the retries).
func (m *mapper) healthcheck(name string, svc *types.ServiceConfig, raw map[string]any, out *service) {
	base := "services." + name + ".healthcheck"
	hc := svc.HealthCheck
	if hc == nil {
		return
	}
	hraw, _ := raw["healthcheck"].(map[string]any)
	if _, ok := hraw["start_interval"]; ok {
		m.refuse(base+".start_interval", "start_interval is not supported yet (Docker API 1.44 or newer; this engine speaks 1.41); remove it")
	}
	m.from("services."+name+".healthcheck", base)
	h := &healthcheck{Disable: hc.Disable}
	if !hc.Disable {
		h.Test = []string(hc.Test)
	}
	if len(h.Test) == 1 && h.Test[0] == "NONE" {
		h = &healthcheck{Disable: true}
	}
	dur := func(d *types.Duration) string {
		if d == nil {
			return ""
		}
		return manifest.FormatDuration(time.Duration(*d))
	}
	if !h.Disable {
		h.Interval, h.Timeout, h.StartPeriod = dur(hc.Interval), dur(hc.Timeout), dur(hc.StartPeriod)
		if hc.Retries != nil {
			h.Retries = int(*hc.Retries)
		}
		if len(h.Test) == 0 {
			// Only timings: compose keeps the image's test; the manifest
			// needs one, so say so.
			m.refuse(base, "healthcheck without test: give test (the image's HEALTHCHECK command is not known here)")
			return
		}
	}
	out.Healthcheck = h
	if h.Disable || out.Readiness != nil {
		return
	}
	budget := healthBudget(hc)
	rd := &readiness{Type: "docker"}
	if budget > defaultReadiness {
		rd.Timeout = manifest.FormatDuration(budget)
	}
	out.Readiness = rd
	m.from("services."+name+".readiness", base)
}

// healthBudget is how long Docker may take to call a container healthy or
// unhealthy: start period, then retries+1 intervals and timeouts; at most
// 10 min (R35).
func healthBudget(hc *types.HealthCheckConfig) time.Duration {
	interval, timeout, retries := dockerHealthInterval, dockerHealthTimeout, dockerHealthRetries
	if hc.Interval != nil {
		interval = time.Duration(*hc.Interval)
	}
	if hc.Timeout != nil {
		timeout = time.Duration(*hc.Timeout)
	}
	if hc.Retries != nil {
		retries = int(*hc.Retries)
	}
	var start time.Duration
	if hc.StartPeriod != nil {
		start = time.Duration(*hc.StartPeriod)
	}
	b := start + time.Duration(retries+1)*(interval+timeout)
	if b > maxReadiness {
		b = maxReadiness
	}
	return b.Round(time.Second)
}

// dependsOn: service_started and service_healthy order the deploy (the
// dependency's readiness passes first; for service_healthy that readiness
// is its healthcheck).
func (m *mapper) dependsOn(name string, svc *types.ServiceConfig, raw map[string]any, out *service) {
	base := "services." + name + ".depends_on"
	deps := slices.Sorted(maps.Keys(svc.DependsOn))
	draw, _ := raw["depends_on"].(map[string]any)
	for _, d := range deps {
		dep := svc.DependsOn[d]
		key := m.writtenKey(base+"."+d, base)
		if dm, ok := draw[d].(map[string]any); ok {
			if r, ok := dm["restart"]; ok && r == true {
				m.refuse(key+".restart", "restart: true is not supported yet: restarting %s does not restart %s; remove it", d, name)
			}
		}
		target, ok := m.p.Services[d]
		if !ok {
			if !dep.Required {
				continue
			}
			m.refuse(key, "depends on %s, which is not enabled (check its profiles)", d)
			continue
		}
		switch dep.Condition {
		case "", types.ServiceConditionStarted:
		case types.ServiceConditionHealthy:
			if target.HealthCheck == nil || target.HealthCheck.Disable || len(target.HealthCheck.Test) == 0 || target.HealthCheck.Test[0] == "NONE" {
				m.refuse(key, "condition: service_healthy, but %s has no healthcheck: give %s a healthcheck, or use service_started", d, d)
				continue
			}
		case types.ServiceConditionCompletedSuccessfully:
			// d is a one-shot (run = "once", see jobs): each deploy runs it
			// to completion before name.
		default:
			m.refuse(key, "condition %q: want service_started, service_healthy or service_completed_successfully", dep.Condition)
			continue
		}
		out.DependsOn = append(out.DependsOn, d)
		m.from(fmt.Sprintf("services.%s.depends_on[%d]", name, len(out.DependsOn)-1), key)
	}
	if len(out.DependsOn) > 0 {
		m.from("services."+name+".depends_on", base)
	}
}

// tmpfsOf renders a tmpfs volume entry as the manifest's "path[:options]".
func tmpfsOf(v types.ServiceVolumeConfig) string {
	var opts []string
	if v.Tmpfs != nil {
		if v.Tmpfs.Size != 0 {
			opts = append(opts, "size="+strconv.FormatInt(int64(v.Tmpfs.Size), 10))
		}
		if v.Tmpfs.Mode != 0 {
			opts = append(opts, fmt.Sprintf("mode=%o", v.Tmpfs.Mode))
		}
	}
	if len(opts) == 0 {
		return v.Target
	}
	return v.Target + ":" + strings.Join(opts, ",")
}

// hasDeviceReservation reports whether a reservations mapping names
// devices.
func hasDeviceReservation(v any) bool {
	r, _ := v.(map[string]any)
	_, ok := r["devices"]
	return ok
}
