// Package manifest loads and validates app manifests (ARCHITECTURE §8): one
// app per TOML file, decoded strictly (an unknown key is an error), then
// checked against every validation rule at once and normalized into a
// core.AppSpec. Every failure is a *ManifestError wrapping core.ErrInvalid
// that lists each problem with its line, column and dotted key
// ("services.web.http[0].port").
//
// Rules, each reported with what would be valid:
//   - name: required DNS label; service names likewise; at least one service.
//   - image: required Docker reference (name[:tag][@sha256:<64 hex>],
//     optionally registry[:port]/path) unless build is set; command:
//     non-empty argv if given.
//   - build: context required (relative to the manifest's directory);
//     dockerfile relative to the context, inside it; args string values;
//     with image also set, image is a tag (the build is tagged with it).
//   - stop_grace 1s..5m (R25); readiness.timeout 1s..10m (R35).
//   - env: names [A-Za-z_][A-Za-z0-9_]*, string values.
//   - secrets: ENV = "name" or { name, as = "env"|"file" }; names
//     [a-zA-Z0-9_.-]+ not starting with '.'; a file secret names a secret no
//     other file secret of the service names; an env secret does not shadow
//     an env entry.
//   - [[http]]: port 1..65535; host a lowercase DNS name or "*."+name;
//     visibility defaults from host (public) or its absence (internal) and,
//     if given, must agree; a public host is unique in the app; container
//     ports are unique per service and protocol (http and tcp share "tcp");
//     response_timeout 1s..1h if given (the edge's wait for response
//     headers; default 60 s at the edge).
//   - [[tcp]]/[[udp]]: port; publish "IP:port" (IPv6 bracketed), unique and
//     non-overlapping (wildcards cover) across the app per protocol;
//     idle_timeout 1s..24h and max_conns 1..100000 if given (the relay's
//     bounds; defaults at the edge: 50 s and 2000 for TCP, 30 s and 4096
//     for UDP).
//   - readiness: type "", none, http, tcp, log or plugin; only the keys of
//     that type; a port must be a declared http/tcp port; http and tcp
//     without a port need exactly one port to probe (R30); log needs
//     pattern; plugin needs plugin ([a-z0-9-]+), and only it takes config.
//   - [[volume]]/[[bind]]: name [a-zA-Z0-9][a-zA-Z0-9_.-]*; absolute clean
//     path, not /, /proc, /sys, /dev, /run/secrets or below; one mount per
//     container path.
//   - [[config]]: source a relative path inside the manifest's directory
//     (a file or a directory), path as a mount's, mode read-only bits
//     (no write bit) if given; Load reads the files (ReadConfigFiles).
//   - placement: Swarm constraints, ATTRIBUTE == or != VALUE (node.id,
//     node.hostname, node.role manager|worker, node.platform.os/arch,
//     node.labels.NAME, engine.labels.NAME), kept without spaces.
//   - devices: clean paths under /dev; networks: Docker names, listed once.
//   - replace: "sequential", or "overlap" on an overlap-eligible service.
//   - run: "once" (a one-shot: no interfaces, readiness, healthcheck or
//     replace).
//   - [hooks]: before_switch and after_switch are non-empty argv arrays
//     (no shell); timeout 1s..1h (default 5m); [[post_start]] and
//     [[pre_stop]] (compose's lifecycle hooks) take command, user,
//     working_dir and env; not on a one-shot (R72).
//   - [notify]: webhook, an absolute http or https URL with a host and no
//     user info (credentials would be stored in every revision).
//   - [jobs.NAME]: a DNS label name; service a declared service that keeps
//     running; schedule "@every D", a descriptor or five cron fields (UTC);
//     command a non-empty argv; timeout 1s..24h (default 10m).
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/gordon-deploy/docker-gordon/core"
)

// MaxSize is the largest manifest Load accepts, in bytes.
const MaxSize = 1 << 20

// Load reads the manifest at path, parses and validates it (see Parse), and
// returns the normalized spec with the hex sha256 of the file's bytes (the
// revision's source digest; also returned with a *ManifestError). A missing
// file wraps core.ErrNotFound; an unreadable or oversized one wraps
// core.ErrInvalid.
func Load(path string) (core.AppSpec, string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return core.AppSpec{}, "", fmt.Errorf("manifest %s: %w: %w", path, core.ErrNotFound, err)
		}
		return core.AppSpec{}, "", fmt.Errorf("manifest %s: %w: %w", path, core.ErrInvalid, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return core.AppSpec{}, "", fmt.Errorf("manifest %s: %w: read: %w", path, core.ErrInvalid, err)
	}
	if len(data) > MaxSize {
		return core.AppSpec{}, "", fmt.Errorf("manifest %s: %w: larger than %d bytes", path, core.ErrInvalid, MaxSize)
	}
	sum := sha256.Sum256(data)
	spec, err := Parse(path, data)
	if err == nil {
		resolveBuildContexts(&spec, filepath.Dir(path))
		err = ReadConfigFiles(&spec, filepath.Dir(path))
	}
	return spec, hex.EncodeToString(sum[:]), err
}

// Parse decodes data (TOML) strictly and validates it. filename only labels
// problems. On success it returns the normalized spec (see Normalize):
// services sorted by name with Name taken from the table key, HTTP
// visibility defaulted (host set → public, none → internal), secrets sorted
// by Env with As "env" or "file", shared networks sorted. Otherwise it
// returns a *ManifestError listing every problem found (a TOML syntax or
// type error stops decoding and is reported alone).
func Parse(filename string, data []byte) (spec core.AppSpec, err error) {
	// A UTF-8 byte order mark (some editors write one) is not TOML.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	idx := indexKeys(data)
	v := &validator{idx: idx}
	raw, ok := v.decode(data)
	if ok {
		spec = v.app(raw)
	}
	if len(v.problems) > 0 {
		sortProblems(v.problems)
		return core.AppSpec{}, &ManifestError{File: filename, Problems: v.problems}
	}
	return Normalize(spec), nil
}

// Normalize returns s in the loader's normal form: services sorted by name,
// secrets sorted by Env, shared networks sorted, and nil Env maps replaced by
// empty ones (so a spec read back from JSON compares equal to a freshly
// parsed one). It does not validate.
func Normalize(s core.AppSpec) core.AppSpec {
	if s.Env == nil {
		s.Env = map[string]string{}
	}
	s.Services = append([]core.ServiceSpec(nil), s.Services...)
	sort.SliceStable(s.Services, func(i, j int) bool { return s.Services[i].Name < s.Services[j].Name })
	for i := range s.Services {
		svc := &s.Services[i]
		if svc.Env == nil {
			svc.Env = map[string]string{}
		}
		if len(svc.Secrets) > 0 {
			svc.Secrets = append([]core.SecretRef(nil), svc.Secrets...)
			sort.SliceStable(svc.Secrets, func(a, b int) bool { return svc.Secrets[a].Env < svc.Secrets[b].Env })
		}
	}
	if len(s.Networks) > 0 {
		s.Networks = append([]string(nil), s.Networks...)
		slices.Sort(s.Networks)
	}
	return s
}

// rawApp is the TOML document as decoded, before validation. Pointers tell
// an absent key from a zero value.
type rawApp struct {
	Name     *string               `toml:"name"`
	Env      map[string]any        `toml:"env"`
	Services map[string]rawService `toml:"services"`
	Networks []string              `toml:"networks"`
	Registry *string               `toml:"registry"`
	Notify   *rawNotify            `toml:"notify"`
	Jobs     map[string]rawJob     `toml:"jobs"`
}

type rawNotify struct {
	Webhook *string `toml:"webhook"`
}

type rawService struct {
	Image     *string        `toml:"image"`
	Build     *rawBuild      `toml:"build"`
	Command   *[]string      `toml:"command"`
	StopGrace *string        `toml:"stop_grace"`
	Env       map[string]any `toml:"env"`
	Secrets   map[string]any `toml:"secrets"`
	HTTP      []rawHTTP      `toml:"http"`
	TCP       []rawL4        `toml:"tcp"`
	UDP       []rawL4        `toml:"udp"`
	Readiness *rawReadiness  `toml:"readiness"`
	Volume    []rawMount     `toml:"volume"`
	Bind      []rawMount     `toml:"bind"`
	Config    []rawConfig    `toml:"config"`
	Devices   []string       `toml:"devices"`

	// Container keys, compose's names (validate_container.go).
	Entrypoint  *[]string       `toml:"entrypoint"`
	StopSignal  *string         `toml:"stop_signal"`
	Healthcheck *rawHealthcheck `toml:"healthcheck"`
	DependsOn   *[]string       `toml:"depends_on"`
	User        *string         `toml:"user"`
	WorkingDir  *string         `toml:"working_dir"`
	Init        *bool           `toml:"init"`
	ReadOnly    *bool           `toml:"read_only"`
	ShmSize     any             `toml:"shm_size"`
	Tmpfs       []string        `toml:"tmpfs"`
	Ulimits     map[string]any  `toml:"ulimits"`
	CapAdd      []string        `toml:"cap_add"`
	CapDrop     []string        `toml:"cap_drop"`
	Sysctls     map[string]any  `toml:"sysctls"`
	ExtraHosts  []string        `toml:"extra_hosts"`
	Labels      map[string]any  `toml:"labels"`
	Resources   *rawResources   `toml:"resources"`
	Logging     *rawLogging     `toml:"logging"`
	Replace     *string         `toml:"replace"`
	Run         *string         `toml:"run"`
	Replicas    *int            `toml:"replicas"`
	Node        *string         `toml:"node"`
	Placement   []string        `toml:"placement"`
	Aliases     []string        `toml:"aliases"`
	Hooks       *rawHooks       `toml:"hooks"`
	Monitor     *rawMonitor     `toml:"monitor"`
	Snapshots   *rawSnapshots   `toml:"snapshots"`
	SleepAfter  *string         `toml:"sleep_after"`
	WakeIgnore  []string        `toml:"wake_ignore"`
	Backup      *rawBackup      `toml:"backup"`
}

// rawBackup is [services.X.backup].
type rawBackup struct {
	Every    *string   `toml:"every"`
	Schedule *string   `toml:"schedule"`
	Keep     *int      `toml:"keep"`
	Command  *[]string `toml:"command"`
	Timeout  *string   `toml:"timeout"`
}

// rawSnapshots is [services.X.snapshots].
type rawSnapshots struct {
	BeforeDeploy *string `toml:"before_deploy"`
	Keep         *int    `toml:"keep"`
}

// rawMonitor is [services.X.monitor] (SPEC R76).
type rawMonitor struct {
	Window       *string  `toml:"window"`
	MaxErrorRate *float64 `toml:"max_error_rate"`
	MinRequests  *int64   `toml:"min_requests"`
}

type rawHooks struct {
	BeforeSwitch *[]string          `toml:"before_switch"`
	AfterSwitch  *[]string          `toml:"after_switch"`
	Timeout      *string            `toml:"timeout"`
	PostStart    []rawLifecycleHook `toml:"post_start"`
	PreStop      []rawLifecycleHook `toml:"pre_stop"`
}

// rawLifecycleHook is one [[hooks.post_start]] or [[hooks.pre_stop]]
// entry: compose's lifecycle hook keys.
type rawLifecycleHook struct {
	Command    *[]string      `toml:"command"`
	User       *string        `toml:"user"`
	WorkingDir *string        `toml:"working_dir"`
	Env        map[string]any `toml:"env"`
}

type rawHTTP struct {
	Port       *int    `toml:"port"`
	Host       *string `toml:"host"`
	Visibility *string `toml:"visibility"`
	// ResponseTimeout is the edge's response header timeout (1s..1h).
	ResponseTimeout *string `toml:"response_timeout"`
	TLS             *string `toml:"tls"`
	Protocol        *string `toml:"protocol"`
	HSTS            *string `toml:"hsts"`
	// BasicAuth are htpasswd bcrypt lines; Allow are CIDRs or IPs.
	BasicAuth *[]string `toml:"basic_auth"`
	Allow     *[]string `toml:"allow"`
}

type rawL4 struct {
	Port    *int    `toml:"port"`
	Publish *string `toml:"publish"`
	// IdleTimeout (1s..24h) and MaxConns (1..100000) bound the relay.
	IdleTimeout *string `toml:"idle_timeout"`
	MaxConns    *int    `toml:"max_conns"`
}

type rawReadiness struct {
	Type    *string        `toml:"type"`
	Path    *string        `toml:"path"`
	Port    *int           `toml:"port"`
	Host    *string        `toml:"host"`
	Pattern *string        `toml:"pattern"`
	Plugin  *string        `toml:"plugin"`
	Config  map[string]any `toml:"config"`
	Timeout *string        `toml:"timeout"`
}

type rawMount struct {
	Name     *string `toml:"name"`
	Path     *string `toml:"path"`
	ReadOnly *bool   `toml:"readonly"`
	// Adopt (volumes only) takes over an existing volume of the same name
	// that another app or incarnation owns (SPEC R13 volume ownership).
	Adopt *bool `toml:"adopt"`
}

// rawConfig is one [[services.X.config]]: a project file shipped with
// the deploy (SPEC R82).
type rawConfig struct {
	Source *string `toml:"source"`
	Path   *string `toml:"path"`
	Mode   any     `toml:"mode"` // octal string "0444" or integer 0o444
}

// Allowed keys per table, for "unknown key" messages (ARCHITECTURE §8).
var (
	appKeys       = []string{"name", "env", "services", "networks", "registry", "notify", "jobs"}
	serviceKeys   = []string{"image", "build", "entrypoint", "command", "stop_grace", "stop_signal", "env", "secrets", "http", "tcp", "udp", "readiness", "healthcheck", "volume", "bind", "config", "devices", "depends_on", "user", "working_dir", "init", "read_only", "shm_size", "tmpfs", "ulimits", "cap_add", "cap_drop", "sysctls", "extra_hosts", "labels", "resources", "logging", "replace", "run", "replicas", "node", "placement", "aliases", "hooks", "monitor", "sleep_after", "wake_ignore", "snapshots", "backup"}
	hooksKeys     = []string{"before_switch", "after_switch", "timeout", "post_start", "pre_stop"}
	monitorKeys   = []string{"window", "max_error_rate", "min_requests"}
	lifecycleKeys = []string{"command", "user", "working_dir", "env"}
	notifyKeys    = []string{"webhook"}
	httpKeys      = []string{"port", "host", "visibility", "response_timeout", "tls", "protocol", "hsts", "basic_auth", "allow"}
	l4Keys        = []string{"port", "publish", "idle_timeout", "max_conns"}
	readinessKeys = []string{"type", "path", "port", "host", "pattern", "plugin", "config", "timeout"}
	mountKeys     = []string{"name", "path", "readonly", "adopt"}
	configKeys    = []string{"source", "path", "mode"}
	secretKeys    = []string{"name", "as"}
	buildKeys     = []string{"context", "dockerfile", "args", "target", "labels"}
	snapshotsKeys = []string{"before_deploy", "keep"}
	backupKeys    = []string{"every", "schedule", "keep", "command", "timeout"}
)

// decode runs go-toml's strict decoder. Unknown keys become problems and
// decoding goes on; a syntax or type error is one problem and ok is false.
func (v *validator) decode(data []byte) (raw rawApp, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			v.problems = append(v.problems, Problem{Message: fmt.Sprintf("TOML decoder failed: %v", r)})
			ok = false
		}
	}()
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	err := dec.Decode(&raw)
	if err == nil {
		return raw, true
	}
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		for i := range strict.Errors {
			de := &strict.Errors[i]
			line, col := de.Position()
			key := v.decodeKey(de, line, col)
			v.problems = append(v.problems, Problem{Line: line, Column: col, Key: key, Message: unknownKeyMessage(key)})
		}
		return raw, true
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		msg := decodeMessage(strings.TrimPrefix(de.Error(), "toml: "))
		v.problems = append(v.problems, Problem{Line: line, Column: col, Key: v.decodeKey(de, line, col), Message: msg})
		return raw, false
	}
	v.problems = append(v.problems, Problem{Message: strings.TrimPrefix(err.Error(), "toml: ")})
	return raw, false
}

// decodeKey names the key a decoder error points at: the indexed key on the
// error's line whose path (indices dropped) is the decoder's key path
// (nearest at or before the column); else the indexed key at the error's
// position; else the decoder's own key path.
func (v *validator) decodeKey(de *toml.DecodeError, line, col int) string {
	want := strings.Join(de.Key(), ".")
	best, bestCol := "", 0
	for k, at := range v.idx.pos {
		if at.Line != line || dropIndices(k) != want {
			continue
		}
		better := best == "" ||
			(at.Column <= col && (bestCol > col || at.Column > bestCol)) ||
			(at.Column > col && bestCol > col && at.Column < bestCol) ||
			(at.Column == bestCol && k < best)
		if better {
			best, bestCol = k, at.Column
		}
	}
	if best != "" {
		// Refine to the innermost key before the column (a value inside an
		// inline table is reported against its table by the decoder).
		refined, refinedCol := best, bestCol
		for k, at := range v.idx.pos {
			if at.Line != line || at.Column > col || !strings.HasPrefix(k, best+".") {
				continue
			}
			if at.Column > refinedCol || (at.Column == refinedCol && (len(k) > len(refined) || (len(k) == len(refined) && k < refined))) {
				refined, refinedCol = k, at.Column
			}
		}
		return refined
	}
	if k, ok := v.idx.keyAt(line, col); ok {
		return k
	}
	return want
}

// dropIndices removes every "[i]" from a canonical key.
func dropIndices(key string) string {
	return indexRE.ReplaceAllString(key, "")
}

var (
	indexRE      = newLazyRE(`\[[0-9]+\]`)
	typeErrorRE  = newLazyRE(`^cannot decode TOML (.+?) into (?:struct field \S+ of type |a Go value of type )?(.+)$`)
	storeErrorRE = newLazyRE(`^cannot store (a table|an array table) in an? (\S+)$`)
)

// decodeMessage rewrites go-toml's type errors ("cannot decode TOML string
// into struct field manifest.rawHTTP.Port of type int") into the user's
// terms ("wrong type: want an integer, got a string"); other messages pass
// through.
func decodeMessage(msg string) string {
	if m := typeErrorRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("wrong type: want %s, got %s", friendlyType(m[2]), withArticle(m[1]))
	}
	if m := storeErrorRE.FindStringSubmatch(msg); m != nil {
		got := "a table"
		if m[1] == "an array table" {
			got = "an array of tables"
		}
		return fmt.Sprintf("wrong type: want %s, got %s", friendlyType(m[2]), got)
	}
	return msg
}

// friendlyType names a Go type (or kind) of the raw structs in TOML terms.
func friendlyType(t string) string {
	t = strings.TrimPrefix(t, "*")
	switch {
	case t == "string":
		return "a string"
	case t == "int" || t == "int64":
		return "an integer"
	case t == "bool":
		return "a boolean"
	case t == "[]string":
		return "an array of strings"
	case strings.HasPrefix(t, "[]") || t == "slice" || t == "array":
		return "an array of tables"
	case strings.HasPrefix(t, "map") || strings.HasPrefix(t, "manifest.raw") || t == "struct":
		return "a table"
	}
	return t
}

// withArticle prefixes a TOML type name ("integer", "inline table") with
// "a" or "an".
func withArticle(s string) string {
	if s != "" && strings.IndexByte("aeiou", s[0]) >= 0 {
		return "an " + s
	}
	return "a " + s
}

// unknownKeyMessage says which keys the enclosing table accepts.
func unknownKeyMessage(key string) string {
	parent := parentKey(key)
	last := key
	if parent != "" {
		last = strings.TrimPrefix(key, parent+".")
	}
	allowed := allowedKeys(parent)
	if allowed == nil {
		return fmt.Sprintf("unknown key %q", last)
	}
	return fmt.Sprintf("unknown key %q: want one of %s", last, strings.Join(allowed, ", "))
}

// allowedKeys returns the keys the table at the canonical key parent
// accepts, or nil when the table is not recognized.
func allowedKeys(parent string) []string {
	parts := splitKey(parent)
	switch {
	case len(parts) == 0:
		return appKeys
	case len(parts) == 1 && parts[0] == "notify":
		return notifyKeys
	case len(parts) == 2 && parts[0] == "jobs":
		return jobKeys
	case len(parts) == 2 && parts[0] == "services":
		return serviceKeys
	case len(parts) == 3 && parts[0] == "services":
		switch stripIndex(parts[2]) {
		case "http":
			return httpKeys
		case "tcp", "udp":
			return l4Keys
		case "readiness":
			return readinessKeys
		case "volume", "bind":
			return mountKeys
		case "config":
			return configKeys
		case "healthcheck":
			return healthcheckKeys
		case "resources":
			return resourcesKeys
		case "logging":
			return loggingKeys
		case "build":
			return buildKeys
		case "hooks":
			return hooksKeys
		case "monitor":
			return monitorKeys
		case "snapshots":
			return snapshotsKeys
		case "backup":
			return backupKeys
		}
	case len(parts) == 4 && parts[0] == "services" && parts[2] == "secrets":
		return secretKeys
	case len(parts) == 4 && parts[0] == "services" && parts[2] == "hooks":
		return lifecycleKeys
	}
	return nil
}

// splitKey splits a canonical key on dots (best-effort: quoted key parts
// that contain dots are split too).
func splitKey(key string) []string {
	if key == "" {
		return nil
	}
	return strings.Split(key, ".")
}

// stripIndex drops a trailing "[i]".
func stripIndex(part string) string {
	if i := strings.IndexByte(part, '['); i >= 0 {
		return part[:i]
	}
	return part
}
