package manifest

import (
	"fmt"
	"maps"
	"math"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Raw container keys (compose's names). Values whose TOML type varies
// (a size as a string or an integer, a ulimit as an integer or a table)
// are decoded as any and checked here.
type rawResources struct {
	Memory any    `toml:"memory"`
	CPUs   any    `toml:"cpus"`
	Pids   *int64 `toml:"pids"`
}

type rawLogging struct {
	Driver  *string        `toml:"driver"`
	Options map[string]any `toml:"options"`
}

var (
	healthcheckKeys = []string{"test", "interval", "timeout", "retries", "start_period", "disable"}
	resourcesKeys   = []string{"memory", "cpus", "pids"}
	loggingKeys     = []string{"driver", "options"}
)

// Bounds of the container keys.
const (
	minHealthInterval = 10 * time.Millisecond
	maxHealthInterval = time.Hour
	minMemory         = 6 << 20 // Docker's minimum memory limit
	maxCPUs           = 1024
)

var (
	userRE       = newLazyRE(`^[a-zA-Z0-9_][a-zA-Z0-9_.-]*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]*)?$`)
	sizeRE       = newLazyRE(`^([0-9]+(?:\.[0-9]+)?) ?([kKmMgGtT]?)(?:[iI]?[bB])?$`)
	sysctlRE     = newLazyRE(`^[a-z0-9_]+(\.[a-zA-Z0-9_/-]+)+$`)
	logDriverRE  = newLazyRE(`^[a-zA-Z0-9][a-zA-Z0-9_.:/-]*$`)
	labelKeyRE   = newLazyRE(`^[a-zA-Z0-9][a-zA-Z0-9_./-]*$`)
	tmpfsOptRE   = newLazyRE(`^(rw|ro|exec|noexec|suid|nosuid|dev|nodev|sync|async|dirsync|remount|mand|nomand|atime|noatime|diratime|nodiratime|relatime|norelatime|strictatime|nostrictatime|(size|nr_blocks|nr_inodes)=[0-9]+[kKmMgG%]?|mode=[0-7]{3,4}|(uid|gid)=[0-9]+)$`)
	rtSignalRE   = newLazyRE(`^RTM(IN\+|AX-)([0-9]{1,2})$`)
	hostLabelRE  = newLazyRE(`^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$`)
	healthTypeRE = newLazyRE(`^(CMD|CMD-SHELL|NONE)$`)
)

// Linux signal names without "SIG", as Docker's signal map knows them.
var signalNames = map[string]bool{
	"ABRT": true, "ALRM": true, "BUS": true, "CHLD": true, "CLD": true, "CONT": true, "FPE": true,
	"HUP": true, "ILL": true, "INT": true, "IO": true, "IOT": true, "KILL": true, "PIPE": true,
	"POLL": true, "PROF": true, "PWR": true, "QUIT": true, "SEGV": true, "STKFLT": true, "STOP": true,
	"SYS": true, "TERM": true, "TRAP": true, "TSTP": true, "TTIN": true, "TTOU": true, "URG": true,
	"USR1": true, "USR2": true, "VTALRM": true, "WINCH": true, "XCPU": true, "XFSZ": true,
	"RTMIN": true, "RTMAX": true,
}

// Linux capability names without "CAP_" (capabilities(7)), plus ALL.
var capabilityNames = map[string]bool{
	"ALL": true, "AUDIT_CONTROL": true, "AUDIT_READ": true, "AUDIT_WRITE": true, "BLOCK_SUSPEND": true,
	"BPF": true, "CHECKPOINT_RESTORE": true, "CHOWN": true, "DAC_OVERRIDE": true, "DAC_READ_SEARCH": true,
	"FOWNER": true, "FSETID": true, "IPC_LOCK": true, "IPC_OWNER": true, "KILL": true, "LEASE": true,
	"LINUX_IMMUTABLE": true, "MAC_ADMIN": true, "MAC_OVERRIDE": true, "MKNOD": true, "NET_ADMIN": true,
	"NET_BIND_SERVICE": true, "NET_BROADCAST": true, "NET_RAW": true, "PERFMON": true, "SETFCAP": true,
	"SETGID": true, "SETPCAP": true, "SETUID": true, "SYS_ADMIN": true, "SYS_BOOT": true,
	"SYS_CHROOT": true, "SYS_MODULE": true, "SYS_NICE": true, "SYS_PACCT": true, "SYS_PTRACE": true,
	"SYS_RAWIO": true, "SYS_RESOURCE": true, "SYS_TIME": true, "SYS_TTY_CONFIG": true, "SYSLOG": true,
	"WAKE_ALARM": true,
}

// Docker's ulimit names.
var ulimitNames = []string{"core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack"}

// NormalizeSignal returns sig as "SIGxxx" (upper case; "SIGRTMIN+3"), or a
// decimal signal number 1..64 as written, and true; false when sig names
// no Linux signal. Used for stop_signal (R25).
func NormalizeSignal(sig string) (string, bool) {
	if n, err := strconv.Atoi(sig); err == nil {
		return strconv.Itoa(n), n >= 1 && n <= 64 && sig == strconv.Itoa(n)
	}
	s := strings.TrimPrefix(strings.ToUpper(sig), "SIG")
	if signalNames[s] {
		return "SIG" + s, true
	}
	if m := rtSignalRE.FindStringSubmatch(s); m != nil {
		if n, err := strconv.Atoi(m[2]); err == nil && n >= 1 && n <= 15 {
			return "SIG" + s, true
		}
	}
	return "", false
}

// ParseSize parses a byte size as Docker and compose write it: an integer
// (bytes) or a decimal number with an optional binary unit b, k, m, g or t
// (optionally followed by "b" or "ib", any case): "64m", "1.5g", "512".
func ParseSize(s string) (int64, bool) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, false
	}
	mult := map[string]float64{"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[strings.ToLower(m[2])]
	f *= mult
	if f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// containerKeys validates every container key of one service into svc.
func (v *validator) containerKeys(key string, raw rawService, svc *core.ServiceSpec) {
	if raw.Entrypoint != nil {
		for i, a := range *raw.Entrypoint {
			if a == "" {
				v.addf(fmt.Sprintf("%s.entrypoint[%d]", key, i), "argument must be a non-empty string")
			}
		}
		svc.Entrypoint = append([]string{}, *raw.Entrypoint...)
	}
	if raw.StopSignal != nil {
		if sig, ok := NormalizeSignal(*raw.StopSignal); ok {
			svc.StopSignal = sig
		} else {
			v.addf(key+".stop_signal", `unknown signal %q: want a Linux signal name such as "SIGTERM", "SIGINT", "SIGQUIT" or "SIGUSR1" (or its number)`, *raw.StopSignal)
		}
	}
	if raw.DependsOn != nil {
		seen := map[string]string{}
		for i, d := range *raw.DependsOn {
			k := fmt.Sprintf("%s.depends_on[%d]", key, i)
			switch {
			case seen[d] != "":
				v.addf(k, "service %q is already listed at %s", d, seen[d])
			case d == svc.Name:
				v.addf(k, "a service cannot depend on itself")
			default:
				seen[d] = k
				if v.depKeys == nil {
					v.depKeys = map[string]string{}
				}
				v.depKeys[svc.Name+"\x00"+d] = k
				svc.DependsOn = append(svc.DependsOn, d)
			}
		}
		slices.Sort(svc.DependsOn)
	}

	c := &svc.Container
	if raw.User != nil {
		if userRE.MatchString(*raw.User) {
			c.User = *raw.User
		} else {
			v.addf(key+".user", `invalid user %q: want "name", "uid", "name:group" or "uid:gid", e.g. "postgres" or "1000:1000"`, *raw.User)
		}
	}
	if raw.WorkingDir != nil {
		if p := *raw.WorkingDir; !path.IsAbs(p) || path.Clean(p) != p {
			v.addf(key+".working_dir", `invalid working_dir %q: want a clean absolute path, e.g. "/app"`, p)
		} else {
			c.WorkingDir = p
		}
	}
	if raw.Init != nil {
		c.Init = *raw.Init
	}
	if raw.ReadOnly != nil {
		c.ReadOnly = *raw.ReadOnly
	}
	if raw.ShmSize != nil {
		if n, ok := v.size(key+".shm_size", raw.ShmSize); ok {
			if n < 1 {
				v.add(key+".shm_size", `must be more than 0 bytes, e.g. "256m"`)
			} else {
				c.ShmSize = n
			}
		}
	}
	c.Tmpfs = v.tmpfs(key, raw.Tmpfs, svc)
	c.Ulimits = v.ulimits(key+".ulimits", raw.Ulimits)
	c.CapAdd = v.capabilities(key+".cap_add", raw.CapAdd)
	c.CapDrop = v.capabilities(key+".cap_drop", raw.CapDrop)
	c.Sysctls = v.sysctls(key+".sysctls", raw.Sysctls)
	c.ExtraHosts = v.extraHosts(key+".extra_hosts", raw.ExtraHosts)
	c.Labels = v.labels(key+".labels", raw.Labels)
	if raw.Resources != nil {
		c.Resources = v.resources(key+".resources", raw.Resources)
	}
	if raw.Logging != nil {
		c.Logging = v.logging(key+".logging", raw.Logging)
	}
}

// size validates a byte size given as a string or an integer (bytes).
func (v *validator) size(k string, raw any) (int64, bool) {
	const rule = `want a size such as "64m", "512m" or "2g" (units b, k, m, g, t; 1024-based) or an integer number of bytes`
	switch t := raw.(type) {
	case int64:
		if t < 0 {
			v.addf(k, "invalid size %d: %s", t, rule)
			return 0, false
		}
		return t, true
	case string:
		n, ok := ParseSize(t)
		if !ok {
			v.addf(k, "invalid size %q: %s", t, rule)
		}
		return n, ok
	default:
		v.addf(k, "wrong type: %s, got %s", rule, tomlType(raw))
		return 0, false
	}
}

// ulimits validates ulimits = { nofile = 65536 } or
// { nofile = { soft = 1024, hard = 65536 } } (-1: unlimited).
func (v *validator) ulimits(k string, raw map[string]any) []core.Ulimit {
	var out []core.Ulimit
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		kk := k + "." + name
		if !slices.Contains(ulimitNames, name) {
			v.addf(kk, "unknown ulimit %q: want one of %s", name, strings.Join(ulimitNames, ", "))
			continue
		}
		u := core.Ulimit{Name: name}
		switch t := raw[name].(type) {
		case int64:
			u.Soft, u.Hard = t, t
		case map[string]any:
			ok := true
			for _, f := range slices.Sorted(maps.Keys(t)) {
				if f != "soft" && f != "hard" {
					v.addf(kk+"."+f, "unknown key %q: want one of soft, hard", f)
					ok = false
				}
			}
			for _, f := range []string{"soft", "hard"} {
				n, isInt := t[f].(int64)
				if !isInt {
					if t[f] == nil {
						v.addf(kk+"."+f, "required: the %s limit (an integer, -1 for unlimited)", f)
					} else {
						v.addf(kk+"."+f, "wrong type: want an integer, got %s", tomlType(t[f]))
					}
					ok = false
				}
				if f == "soft" {
					u.Soft = n
				} else {
					u.Hard = n
				}
			}
			if !ok {
				continue
			}
		default:
			v.addf(kk, "wrong type: want an integer or { soft = 1024, hard = 65536 }, got %s", tomlType(t))
			continue
		}
		switch {
		case u.Soft < -1 || u.Hard < -1:
			v.addf(kk, "invalid ulimit %s: want limits of 0 or more, or -1 for unlimited", name)
		case u.Hard != -1 && (u.Soft == -1 || u.Soft > u.Hard):
			v.addf(kk, "invalid ulimit %s: soft limit %d is above hard limit %d", name, u.Soft, u.Hard)
		default:
			out = append(out, u)
		}
	}
	return out
}

// capabilities validates cap_add or cap_drop: Linux capability names with
// or without "CAP_", any case, or "ALL"; stored upper-case without "CAP_".
func (v *validator) capabilities(k string, raw []string) []string {
	var out []string
	seen := map[string]string{}
	for i, c := range raw {
		kk := fmt.Sprintf("%s[%d]", k, i)
		n := strings.TrimPrefix(strings.ToUpper(c), "CAP_")
		switch {
		case !capabilityNames[n]:
			v.addf(kk, `unknown capability %q: want a Linux capability such as "NET_ADMIN", "SYS_PTRACE" or "CHOWN" (with or without "CAP_"), or "ALL"`, c)
		case seen[n] != "":
			v.addf(kk, "capability %q is already listed at %s", c, seen[n])
		default:
			seen[n] = kk
			out = append(out, n)
		}
	}
	return out
}

// flatten turns nested tables (a dotted key written unquoted) back into
// dotted names, so [sysctls] net.core.somaxconn = 1024 means
// "net.core.somaxconn". keys maps each name to its canonical key.
func flatten(prefix string, raw map[string]any, out map[string]any, keys map[string]string, at string) {
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		name := k
		if prefix != "" {
			name = prefix + "." + k
		}
		canon := at + "." + k
		if sub, ok := raw[k].(map[string]any); ok {
			flatten(name, sub, out, keys, canon)
			continue
		}
		out[name] = raw[k]
		keys[name] = canon
	}
}

// stringValue renders a string, integer or boolean value as a string.
func stringValue(val any) (string, bool) {
	switch t := val.(type) {
	case string:
		return t, true
	case int64:
		return strconv.FormatInt(t, 10), true
	case bool:
		return strconv.FormatBool(t), true
	}
	return "", false
}

// sysctls validates namespaced kernel parameters (Docker accepts net.*,
// kernel.msg*, kernel.sem, kernel.shm* and fs.mqueue.*).
func (v *validator) sysctls(k string, raw map[string]any) map[string]string {
	flat, keys := map[string]any{}, map[string]string{}
	flatten("", raw, flat, keys, k)
	var out map[string]string
	for _, name := range slices.Sorted(maps.Keys(flat)) {
		kk := keys[name]
		val, ok := stringValue(flat[name])
		ns := strings.HasPrefix(name, "net.") || strings.HasPrefix(name, "fs.mqueue.") || name == "kernel.sem" ||
			strings.HasPrefix(name, "kernel.msg") || strings.HasPrefix(name, "kernel.shm")
		switch {
		case !sysctlRE.MatchString(name) || !ns:
			v.addf(kk, `sysctl %q cannot be set per container: want a namespaced parameter under net., kernel.msg*, kernel.sem, kernel.shm* or fs.mqueue., e.g. "net.core.somaxconn"`, name)
		case !ok:
			v.addf(kk, "wrong type: want a string or an integer, got %s", tomlType(flat[name]))
		case strings.ContainsAny(val, "\x00\n"):
			v.add(kk, "value must not contain a NUL or newline character")
		default:
			if out == nil {
				out = map[string]string{}
			}
			out[name] = val
		}
	}
	return out
}

// extraHosts validates extra_hosts = ["name:ip"] (also "name=ip"; ip is an
// IPv4 or IPv6 address, optionally bracketed, or "host-gateway"); stored as
// "name:ip".
func (v *validator) extraHosts(k string, raw []string) []string {
	var out []string
	for i, e := range raw {
		kk := fmt.Sprintf("%s[%d]", k, i)
		name, ip, ok := strings.Cut(e, "=")
		if !ok {
			name, ip, ok = strings.Cut(e, ":")
		}
		ip = strings.TrimSuffix(strings.TrimPrefix(ip, "["), "]")
		if !ok || !isExtraHostName(name) || (ip != "host-gateway" && net.ParseIP(ip) == nil) {
			v.addf(kk, `invalid extra host %q: want "name:ip", e.g. "db.internal:10.0.0.5", "v6:[::1]" or "host.docker.internal:host-gateway"`, e)
			continue
		}
		out = append(out, name+":"+ip)
	}
	return out
}

// isExtraHostName reports whether s is a host name for /etc/hosts.
func isExtraHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.ToLower(s), ".") {
		if !hostLabelRE.MatchString(label) {
			return false
		}
	}
	return true
}

// labels validates container labels; keys under the runtime's prefix
// (core.LabelPrefix) are refused because the runtime owns them.
func (v *validator) labels(k string, raw map[string]any) map[string]string {
	flat, keys := map[string]any{}, map[string]string{}
	flatten("", raw, flat, keys, k)
	var out map[string]string
	for _, name := range slices.Sorted(maps.Keys(flat)) {
		kk := keys[name]
		val, ok := stringValue(flat[name])
		switch {
		case !labelKeyRE.MatchString(name):
			v.addf(kk, `invalid label key %q: want letters, digits, '.', '-', '_' or '/', e.g. "com.example.team"`, name)
		case strings.HasPrefix(name, core.LabelPrefix):
			v.addf(kk, "label %q is reserved: keys under %q belong to docker gordon", name, core.LabelPrefix)
		case !ok:
			v.addf(kk, "wrong type: want a string, got %s", tomlType(flat[name]))
		default:
			if out == nil {
				out = map[string]string{}
			}
			out[name] = val
		}
	}
	return out
}

// resources validates [services.<name>.resources].
func (v *validator) resources(k string, raw *rawResources) core.Resources {
	var r core.Resources
	if raw.Memory != nil {
		if n, ok := v.size(k+".memory", raw.Memory); ok {
			if n < minMemory {
				v.addf(k+".memory", "memory limit %v is below Docker's minimum of 6m", raw.Memory)
			} else {
				r.Memory = n
			}
		}
	}
	if raw.CPUs != nil {
		var f float64
		ok := true
		switch t := raw.CPUs.(type) {
		case int64:
			f = float64(t)
		case float64:
			f = t
		case string:
			var err error
			f, err = strconv.ParseFloat(t, 64)
			ok = err == nil
		default:
			ok = false
		}
		switch {
		case !ok:
			v.addf(k+".cpus", "invalid cpus %v: want a number of CPUs, e.g. 1.5", raw.CPUs)
		case f <= 0 || f > maxCPUs || math.IsNaN(f) || f*1e9 < 1e6:
			v.addf(k+".cpus", "invalid cpus %v: want more than 0 (at least 0.001) and at most %d CPUs, e.g. 0.5 or 2", raw.CPUs, maxCPUs)
		default:
			r.CPUs = f
		}
	}
	if raw.Pids != nil {
		if *raw.Pids < 1 {
			v.addf(k+".pids", "invalid pids %d: want the maximum number of processes, at least 1 (omit pids for no limit)", *raw.Pids)
		} else {
			r.Pids = *raw.Pids
		}
	}
	return r
}

// logging validates [services.<name>.logging]: driver and string options.
func (v *validator) logging(k string, raw *rawLogging) *core.Logging {
	l := &core.Logging{}
	if raw.Driver != nil {
		if logDriverRE.MatchString(*raw.Driver) {
			l.Driver = *raw.Driver
		} else {
			v.addf(k+".driver", `invalid log driver %q: want a Docker log driver name such as "json-file", "local", "journald", "syslog" or "none"`, *raw.Driver)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Options)) {
		val, ok := stringValue(raw.Options[name])
		if !ok {
			v.addf(k+".options."+name, "wrong type: want a string, got %s", tomlType(raw.Options[name]))
			continue
		}
		if l.Options == nil {
			l.Options = map[string]string{}
		}
		l.Options[name] = val
	}
	if l.Driver == "none" && len(l.Options) > 0 {
		v.add(k+".options", `log driver "none" takes no options`)
	}
	return l
}
