package compose

import (
	"bytes"

	toml "github.com/pelletier/go-toml/v2"
)

// doc is the app manifest (ARCHITECTURE §8) as convert writes it. Field
// names and shapes follow core/manifest's TOML keys.
type doc struct {
	// comments are written as "# " lines after the header.
	comments []string

	Name     string              `toml:"name"`
	Networks []string            `toml:"networks,omitempty"`
	Services map[string]*service `toml:"services"`
	Jobs     map[string]*job     `toml:"jobs,omitempty"`
}

type service struct {
	Image       string               `toml:"image,omitempty"`
	Build       *build               `toml:"build,omitempty"`
	Entrypoint  *[]string            `toml:"entrypoint,omitempty"`
	Command     *[]string            `toml:"command,omitempty"`
	StopGrace   string               `toml:"stop_grace,omitempty"`
	StopSignal  string               `toml:"stop_signal,omitempty"`
	Replace     string               `toml:"replace,omitempty"`
	Run         string               `toml:"run,omitempty"`
	Replicas    int                  `toml:"replicas,omitempty"`
	Node        string               `toml:"node,omitempty"`
	Placement   []string             `toml:"placement,omitempty"`
	Aliases     []string             `toml:"aliases,omitempty"`
	DependsOn   []string             `toml:"depends_on,omitempty"`
	User        string               `toml:"user,omitempty"`
	WorkingDir  string               `toml:"working_dir,omitempty"`
	Init        *bool                `toml:"init,omitempty"`
	ReadOnly    bool                 `toml:"read_only,omitempty"`
	ShmSize     int64                `toml:"shm_size,omitempty"`
	Tmpfs       []string             `toml:"tmpfs,omitempty"`
	CapAdd      []string             `toml:"cap_add,omitempty"`
	CapDrop     []string             `toml:"cap_drop,omitempty"`
	ExtraHosts  []string             `toml:"extra_hosts,omitempty"`
	Ulimits     map[string]any       `toml:"ulimits,omitempty"`
	Sysctls     map[string]string    `toml:"sysctls,omitempty"`
	Labels      map[string]string    `toml:"labels,omitempty"`
	Healthcheck *healthcheck         `toml:"healthcheck,omitempty"`
	Resources   *resources           `toml:"resources,omitempty"`
	Logging     *logging             `toml:"logging,omitempty"`
	Env         map[string]string    `toml:"env,omitempty"`
	Secrets     map[string]secretRef `toml:"secrets,omitempty"`
	HTTP        []httpIface          `toml:"http,omitempty"`
	TCP         []l4Iface            `toml:"tcp,omitempty"`
	UDP         []l4Iface            `toml:"udp,omitempty"`
	Readiness   *readiness           `toml:"readiness,omitempty"`
	Volume      []mount              `toml:"volume,omitempty"`
	Bind        []mount              `toml:"bind,omitempty"`
	Config      []configEntry        `toml:"config,omitempty"`
	Devices     []string             `toml:"devices,omitempty"`
	Hooks       *hooks               `toml:"hooks,omitempty"`
	Monitor     *monitor             `toml:"monitor,omitempty"`
	Snapshots   *snapshots           `toml:"snapshots,omitempty"`
	Backup      *backup              `toml:"backup,omitempty"`
	SleepAfter  string               `toml:"sleep_after,omitempty"`
	WakeIgnore  []string             `toml:"wake_ignore,omitempty"`
}

type healthcheck struct {
	Test        []string `toml:"test,omitempty"`
	Interval    string   `toml:"interval,omitempty"`
	Timeout     string   `toml:"timeout,omitempty"`
	Retries     int      `toml:"retries,omitempty"`
	StartPeriod string   `toml:"start_period,omitempty"`
	Disable     bool     `toml:"disable,omitempty"`
}

type resources struct {
	Memory int64   `toml:"memory,omitempty"`
	CPUs   float64 `toml:"cpus,omitempty"`
	Pids   int64   `toml:"pids,omitempty"`
}

type logging struct {
	Driver  string            `toml:"driver,omitempty"`
	Options map[string]string `toml:"options,omitempty"`
}

type secretRef struct {
	Name string `toml:"name"`
	As   string `toml:"as"`
}

type httpIface struct {
	Port      int      `toml:"port"`
	Host      string   `toml:"host,omitempty"`
	TLS       string   `toml:"tls,omitempty"`
	BasicAuth []string `toml:"basic_auth,omitempty"`
	Allow     []string `toml:"allow,omitempty"`
}

type l4Iface struct {
	Port    int    `toml:"port"`
	Publish string `toml:"publish"`
}

type readiness struct {
	Type    string         `toml:"type,omitempty"`
	Path    string         `toml:"path,omitempty"`
	Port    int            `toml:"port,omitempty"`
	Host    string         `toml:"host,omitempty"`
	Pattern string         `toml:"pattern,omitempty"`
	Plugin  string         `toml:"plugin,omitempty"`
	Config  map[string]any `toml:"config,omitempty"`
	Timeout string         `toml:"timeout,omitempty"`
}

// configEntry is one [[config]]: a project file (SPEC R82).
type configEntry struct {
	Source string `toml:"source"`
	Path   string `toml:"path"`
	Mode   string `toml:"mode,omitempty"` // octal, "0440"
}

type mount struct {
	Name     string `toml:"name"`
	Path     string `toml:"path"`
	ReadOnly bool   `toml:"readonly,omitempty"`
}

// encode writes the manifest as TOML with a header saying where it came
// from (maps are written in key order, so the output is stable).
func (d *doc) encode() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# App manifest converted from a compose project by docker gordon convert.\n")
	for _, c := range d.comments {
		b.WriteString("# " + c + "\n")
	}
	enc := toml.NewEncoder(&b)
	enc.SetIndentTables(false)
	enc.SetArraysMultiline(false)
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
