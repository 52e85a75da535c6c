package core

// Healthcheck is Docker's container healthcheck with compose's meaning
// (healthcheck: test, interval, timeout, retries, start_period, disable).
type Healthcheck struct {
	// Test is Docker's form: ["CMD", argv...], ["CMD-SHELL", "command"] or
	// ["NONE"] (disables the image's HEALTHCHECK). A manifest string is
	// stored as ["CMD-SHELL", string]. Empty only when Disable is set.
	Test []string `json:"test,omitempty"`
	// Interval between checks; zero means Docker's default (30 s).
	Interval Duration `json:"interval,omitempty"`
	// Timeout of one check; zero means Docker's default (30 s).
	Timeout Duration `json:"timeout,omitempty"`
	// Retries is the number of consecutive failures that make the container
	// unhealthy; zero means Docker's default (3).
	Retries int `json:"retries,omitempty"`
	// StartPeriod is the time failures do not count; zero means none.
	StartPeriod Duration `json:"start_period,omitempty"`
	// Disable turns off the image's HEALTHCHECK (Docker's ["NONE"]).
	Disable bool `json:"disable,omitempty"`
}

// Enabled reports whether h declares a check to run (not disabled, not
// ["NONE"]).
func (h *Healthcheck) Enabled() bool {
	return h != nil && !h.Disable && len(h.Test) > 0 && h.Test[0] != "NONE"
}

// ContainerOptions are the container keys of a service, with compose's
// names and meanings. The zero value means Docker's (and the image's)
// defaults, except for the logging default of DefaultLogging.
type ContainerOptions struct {
	// User is "user", "uid", "user:group" or "uid:gid" (compose user).
	User string `json:"user,omitempty"`
	// WorkingDir is an absolute path replacing the image's WORKDIR.
	WorkingDir string `json:"working_dir,omitempty"`
	// Init runs Docker's init (tini) as PID 1.
	Init bool `json:"init,omitempty"`
	// ReadOnly mounts the container's root filesystem read-only.
	ReadOnly bool `json:"read_only,omitempty"`
	// ShmSize is the size of /dev/shm in bytes; zero means Docker's 64 MiB.
	ShmSize int64 `json:"shm_size,omitempty"`
	// Tmpfs mounts, by container path (in manifest order).
	Tmpfs []TmpfsMount `json:"tmpfs,omitempty"`
	// Ulimits, sorted by name.
	Ulimits []Ulimit `json:"ulimits,omitempty"`
	// CapAdd and CapDrop are Linux capabilities as written ("NET_ADMIN",
	// "CAP_SYS_PTRACE" or "ALL"), upper-case.
	CapAdd  []string `json:"cap_add,omitempty"`
	CapDrop []string `json:"cap_drop,omitempty"`
	// Sysctls are namespaced kernel parameters ("net.core.somaxconn").
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// ExtraHosts are "name:ip" lines added to /etc/hosts (ip may be
	// "host-gateway").
	ExtraHosts []string `json:"extra_hosts,omitempty"`
	// Labels are added to the container's labels; keys under the runtime's
	// own prefixes are refused by the manifest.
	Labels map[string]string `json:"labels,omitempty"`
	// Resources are the container's limits.
	Resources Resources `json:"resources,omitzero"`
	// Logging is the log driver; nil means DefaultLogging.
	Logging *Logging `json:"logging,omitempty"`
}

// TmpfsMount is one tmpfs mount: "path[:options]" in the manifest.
type TmpfsMount struct {
	// Path is absolute and clean.
	Path string `json:"path"`
	// Options are Docker's tmpfs options as written ("size=64m,mode=1777").
	Options string `json:"options,omitempty"`
}

// Ulimit is one resource limit (setrlimit): Soft <= Hard.
type Ulimit struct {
	// Name is Docker's ulimit name ("nofile", "nproc", "core", ...).
	Name string `json:"name"`
	Soft int64  `json:"soft"`
	Hard int64  `json:"hard"`
}

// Resources are a service's limits (compose deploy.resources.limits).
type Resources struct {
	// Memory is the memory limit in bytes (at least 6 MiB); zero: none.
	Memory int64 `json:"memory,omitempty"`
	// CPUs is the CPU quota in CPUs (1.5 = one and a half); zero: none.
	CPUs float64 `json:"cpus,omitempty"`
	// Pids is the maximum number of processes; zero: none.
	Pids int64 `json:"pids,omitempty"`
}

// Logging is a container's log driver (compose logging).
type Logging struct {
	// Driver is Docker's log driver name ("json-file", "local", "journald",
	// "none", ...); empty means the engine's default driver.
	Driver string `json:"driver,omitempty"`
	// Options are the driver's options, passed as written.
	Options map[string]string `json:"options,omitempty"`
}

// DefaultLogging is the log configuration of a service without a logging
// table: json-file rotated at 10 MiB, 3 files kept.
func DefaultLogging() Logging {
	return Logging{Driver: "json-file", Options: map[string]string{"max-size": "10m", "max-file": "3"}}
}

// EffectiveLogging returns o.Logging, or DefaultLogging when nil.
func (o *ContainerOptions) EffectiveLogging() Logging {
	if o.Logging != nil {
		return *o.Logging
	}
	return DefaultLogging()
}
