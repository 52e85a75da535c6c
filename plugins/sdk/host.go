package sdk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/runtime"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/traffic"
)

// DefaultStartTimeout bounds a plugin's start and handshake.
const DefaultStartTimeout = 10 * time.Second

// HostConfig configures a Host. Every field is optional.
type HostConfig struct {
	// SelfExe is the docker-gordon executable (os.Executable()); built-ins
	// are launched by re-executing it with GORDON_PLUGIN=<kind>/<name>.
	// Empty: built-ins cannot be launched (ErrNotFound).
	SelfExe string
	// Builtins lists the "<kind>/<name>" served by SelfExe. nil: the
	// DefaultBuiltins (plugins/builtin.go's table, kept equal by its test);
	// empty non-nil: none.
	Builtins []string
	// PluginDirs is the plugin path, searched in order: --plugin-dir,
	// GORDON_PLUGIN_PATH (split by ':'), <state>/plugins.
	PluginDirs []string
	// Env is extra environment for every plugin ("KEY=value", e.g.
	// DOCKER_HOST, GORDON_STATE_DIR); it overrides the host's environment.
	Env []string
	// Logger receives the host's plugin lifecycle logs and every plugin's
	// stderr (re-logged line by line). nil: discarded.
	Logger hclog.Logger
	// StartTimeout bounds start + handshake of one plugin; zero = 10 s.
	StartTimeout time.Duration
	// AutoMTLS turns on go-plugin's AutoMTLS on top of the private socket
	// directory (ARCHITECTURE §1 as written; costs ~2x the start time).
	// The CLI sets it from GORDON_PLUGIN_MTLS=1.
	AutoMTLS bool
}

// Host launches plugins lazily and caches one process per kind/name
// (ARCHITECTURE §1). Every plugin is a go-plugin managed client over gRPC,
// killed by Close, by plugin.CleanupClients, and by the kernel when the
// host dies (Pdeathsig on Linux). Safe for concurrent use.
//
// Plugins listen on unix sockets inside a directory the host creates with
// mode 0700 (PLUGIN_UNIX_SOCKET_DIR), so only the host's own user (and
// root) can reach them. That is the protection go-plugin's AutoMTLS gives
// on one machine, without its cost: AutoMTLS generated two P-521 keys and
// ran a TLS handshake per plugin start, which tripled the start time
// (about 130-200 ms against 57-68 ms per start under load).
type Host struct {
	cfg HostConfig

	mu      sync.Mutex // guards running, starting and closed
	running map[string]*running
	// starting serializes the starts of one kind/name; starts of
	// different plugins run concurrently.
	starting map[string]*sync.Mutex
	closed   bool
	// sockDir is the private socket directory ("" until the first start).
	sockDir string
}

type running struct {
	found  Found
	client *plugin.Client
	iface  any
	// kill ends the process directly (exec.CommandContext), without
	// waiting for go-plugin's client lock.
	kill context.CancelFunc
	// killed is set before the host kills the process on purpose.
	killed *atomic.Bool
}

// exitLogger is a plugin's logger for go-plugin: once the host killed the
// plugin on purpose (Close), go-plugin's "plugin process exited" error is
// logged at debug level, so a command does not end with an error line
// about its own clean-up. An unexpected exit is still an error.
type exitLogger struct {
	hclog.Logger
	killed *atomic.Bool
}

func (l exitLogger) Error(msg string, args ...any) {
	if l.killed.Load() && msg == "plugin process exited" {
		l.Logger.Debug(msg, args...)
		return
	}
	l.Logger.Error(msg, args...)
}

// Warn demotes go-plugin's warnings about its graceful exit to debug once
// the host killed the plugin on purpose: Close kills outright, so "plugin
// failed to exit gracefully" and the closing connection's error describe
// the intended clean-up, not a problem (seen at every stop of
// `reconcile --watch`).
func (l exitLogger) Warn(msg string, args ...any) {
	if l.killed.Load() && (msg == "plugin failed to exit gracefully" || msg == "error closing client during Kill") {
		l.Logger.Debug(msg, args...)
		return
	}
	l.Logger.Warn(msg, args...)
}

// DefaultBuiltins are the built-in plugins of docker-gordon, by id. The
// table of factories is plugins/builtin.go (STYLE 5); its test keeps the two
// equal.
var DefaultBuiltins = []string{"probe/http", "probe/log", "probe/tcp", "runtime/docker", "runtime/swarm", "traffic/edge"}

// NewHost returns a Host; nothing is started until a plugin is asked for.
// A malformed Builtins id wraps core.ErrInvalid.
func NewHost(cfg HostConfig) (*Host, error) {
	if cfg.Builtins == nil {
		cfg.Builtins = append([]string(nil), DefaultBuiltins...)
	}
	for _, id := range cfg.Builtins {
		if _, _, err := ParseID(id); err != nil {
			return nil, fmt.Errorf("built-in plugins: %w", err)
		}
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Host{cfg: cfg, running: map[string]*running{}, starting: map[string]*sync.Mutex{}}, nil
}

// Runtime returns the runtime plugin name (e.g. "docker"), starting it on
// first use. Unknown name → ErrNotFound; a plugin that fails to start,
// hangs past StartTimeout, breaks the handshake or speaks another protocol
// version → an error naming it (ErrPluginExited or ErrUnavailable).
func (h *Host) Runtime(ctx context.Context, name string) (core.Runtime, error) {
	v, err := h.dispense(ctx, KindRuntime, name)
	if err != nil {
		return nil, err
	}
	return v.(core.Runtime), nil
}

// Probe returns the probe plugin name ("http", "tcp", "log" or custom);
// see Runtime for errors.
func (h *Host) Probe(ctx context.Context, name string) (core.Prober, error) {
	v, err := h.dispense(ctx, KindProbe, name)
	if err != nil {
		return nil, err
	}
	return v.(core.Prober), nil
}

// Traffic returns the traffic plugin name (e.g. "edge"); see Runtime.
func (h *Host) Traffic(ctx context.Context, name string) (core.Traffic, error) {
	v, err := h.dispense(ctx, KindTraffic, name)
	if err != nil {
		return nil, err
	}
	return v.(core.Traffic), nil
}

// Describe starts (or reuses) plugin kind/name and returns its identity
// from the Describe RPC. Bad kind → ErrInvalid.
func (h *Host) Describe(ctx context.Context, kind, name string) (Info, error) {
	if !ValidKind(kind) {
		return Info{}, fmt.Errorf("%w: plugin kind %q: want runtime, probe or traffic", core.ErrInvalid, kind)
	}
	v, err := h.dispense(ctx, kind, name)
	if err != nil {
		return Info{}, err
	}
	d, ok := v.(interface {
		PluginInfo(context.Context) (wire.Info, error)
	})
	if !ok {
		return Info{}, fmt.Errorf("plugin %s/%s: no Describe: %w", kind, name, core.ErrInvalid)
	}
	return d.PluginInfo(ctx)
}

// List returns the built-ins (sorted by id) followed by the custom plugins
// of the plugin path in search order, shadowed ones included and marked.
func (h *Host) List() []Found {
	var out []Found
	ids := append([]string(nil), h.cfg.Builtins...)
	sort.Strings(ids)
	for _, id := range ids {
		kind, name, _ := ParseID(id) // validated by NewHost
		out = append(out, Found{Kind: kind, Name: name, Path: h.cfg.SelfExe, Builtin: true})
	}
	return append(out, Discover(h.cfg.PluginDirs, h.cfg.Builtins)...)
}

// PID returns the process ID of the running plugin kind/name, or 0.
func (h *Host) PID(kind, name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.running[kind+"/"+name]
	if r == nil || r.client.Exited() {
		return 0
	}
	if rc := r.client.ReattachConfig(); rc != nil && rc.Pid != 0 {
		return rc.Pid
	}
	return 0
}

// Close kills every plugin this host started (and go-plugin's managed
// clients); later calls start nothing and fail with ErrUnavailable.
func (h *Host) Close() {
	h.mu.Lock()
	rs := h.running
	h.running = map[string]*running{}
	h.closed = true
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func(r *running) {
			defer wg.Done()
			// Plugins hold no state of their own (the journal is the
			// host's), so they are killed outright rather than asked to
			// exit: the graceful path cost the CLI 20-40 ms at every exit.
			// Kill then reaps the process and its resources.
			r.killed.Store(true)
			r.kill()
			r.client.Kill()
		}(r)
	}
	wg.Wait()
	plugin.CleanupClients()
	h.mu.Lock()
	dir := h.sockDir
	h.sockDir = ""
	h.mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// socketDir returns the host's private plugin socket directory, creating
// it (mode 0700, under TMPDIR) on first use.
func (h *Host) socketDir() (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return "", fmt.Errorf("plugin host closed: %w", core.ErrUnavailable)
	}
	if h.sockDir != "" {
		return h.sockDir, nil
	}
	tmp := pluginTempDir()
	sweepStaleSocketDirs(tmp)
	dir, err := os.MkdirTemp(tmp, "gordon-plugins-")
	if err != nil {
		return "", fmt.Errorf("plugin socket directory: %w", err)
	}
	writeOwner(dir)
	h.sockDir = dir
	return dir, nil
}

// pluginTempDir is TMPDIR when it exists, else /tmp (a FROM-scratch
// image may have neither; then "" lets the caller fail clearly).
func pluginTempDir() string {
	if dir := os.TempDir(); isDir(dir) {
		return dir
	}
	if isDir("/tmp") {
		return "/tmp"
	}
	return ""
}

// lookup resolves kind/name: built-ins first, then the plugin path.
func (h *Host) lookup(kind, name string) (Found, error) {
	id := kind + "/" + name
	for _, b := range h.cfg.Builtins {
		if b == id {
			if h.cfg.SelfExe == "" {
				return Found{}, fmt.Errorf("plugin %s: built-in but the host has no executable to re-execute: %w", id, core.ErrNotFound)
			}
			return Found{Kind: kind, Name: name, Path: h.cfg.SelfExe, Builtin: true}, nil
		}
	}
	for _, f := range Discover(h.cfg.PluginDirs, h.cfg.Builtins) {
		if f.ID() == id && !f.Shadowed {
			return f, nil
		}
	}
	return Found{}, fmt.Errorf("plugin %s: no built-in and no executable gordon-%s-%s on the plugin path %v: %w",
		id, kind, name, h.cfg.PluginDirs, core.ErrNotFound)
}

func (h *Host) dispense(ctx context.Context, kind, name string) (any, error) {
	id := kind + "/" + name
	if v, ok, err := h.cached(id); ok || err != nil {
		return v, err
	}
	h.mu.Lock()
	startMu := h.starting[id]
	if startMu == nil {
		startMu = &sync.Mutex{}
		h.starting[id] = startMu
	}
	h.mu.Unlock()
	startMu.Lock()
	defer startMu.Unlock()
	if v, ok, err := h.cached(id); ok || err != nil { // started meanwhile
		return v, err
	}
	f, err := h.lookup(kind, name)
	if err != nil {
		return nil, err
	}
	r, err := h.start(ctx, f)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed { // Close ran during the start
		r.killed.Store(true)
		r.kill()
		go r.client.Kill()
		return nil, fmt.Errorf("plugin %s: host closed: %w", id, core.ErrUnavailable)
	}
	h.running[id] = r
	return r.iface, nil
}

// cached returns the live plugin id (ok), or an error once the host is
// closed; a plugin whose process exited is dropped so it is started anew.
func (h *Host) cached(id string) (any, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false, fmt.Errorf("plugin %s: host closed: %w", id, core.ErrUnavailable)
	}
	r := h.running[id]
	if r == nil {
		return nil, false, nil
	}
	if !r.client.Exited() {
		return r.iface, true, nil
	}
	r.kill()
	delete(h.running, id) // died: start a fresh one
	return nil, false, nil
}

// start launches f and completes the handshake, bounded by StartTimeout
// and ctx.
func (h *Host) start(ctx context.Context, f Found) (*running, error) {
	id := f.ID()
	var client *plugin.Client
	origin := wire.Origin{Name: id, Exited: func() bool { return client.Exited() }}
	var p plugin.Plugin
	switch f.Kind {
	case KindRuntime:
		p = &runtime.Plugin{Origin: origin}
	case KindProbe:
		p = &probe.Plugin{Origin: origin}
	case KindTraffic:
		p = &traffic.Plugin{Origin: origin}
	default:
		return nil, fmt.Errorf("%w: plugin kind %q", core.ErrInvalid, f.Kind)
	}

	// procCtx kills the process group when cancelled: used when the
	// caller's ctx ends mid-start (go-plugin's Kill would wait for the
	// start timeout) and by Close. The whole group goes, because go-plugin
	// waits for the plugin's stdout and stderr to close before it reaps
	// the plugin: a child that inherited them (a script's sleep) would
	// hold every Kill, and so the command's exit, until it ended.
	procCtx, kill := context.WithCancel(context.Background())
	cmd := exec.CommandContext(procCtx, f.Path)
	cmd.Cancel = func() error { return killProcessGroup(cmd.Process) }
	sockDir, err := h.socketDir()
	if err != nil {
		kill()
		return nil, err
	}
	cmd.Env = h.pluginEnv(f, sockDir)
	cmd.SysProcAttr = pluginSysProcAttr()

	logger := h.cfg.Logger.Named(id)
	killed := new(atomic.Bool)
	client = plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{wire.ProtocolVersion: {f.Kind: p}},
		Cmd:              cmd,
		SkipHostEnv:      true, // pluginEnv already holds the host env, in the right order
		Managed:          true,
		AutoMTLS:         h.cfg.AutoMTLS, // off by default: sockets in a 0700 directory (see Host)
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     h.cfg.StartTimeout,
		Logger:           exitLogger{Logger: logger, killed: killed},
		// Only the handshake travels on the plugin's stdout. What plugin
		// code writes to os.Stdout/os.Stderr after Serve is relayed by
		// go-plugin over gRPC and lands in the host Logger too, never on
		// the CLI's own stdout.
		SyncStdout: logger.StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true}),
		SyncStderr: logger.StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true}),
	})

	type result struct {
		iface any
		err   error
	}
	done := make(chan result, 1)
	go func() {
		rpc, err := client.Client()
		if err != nil {
			done <- result{err: err}
			return
		}
		v, err := rpc.Dispense(f.Kind)
		done <- result{iface: v, err: err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			kill()
			client.Kill()
			return nil, h.startError(f, r.err)
		}
		return &running{found: f, client: client, iface: r.iface, kill: kill, killed: killed}, nil
	case <-ctx.Done():
		kill() // the start then fails at once: "plugin exited"
		go client.Kill()
		return nil, fmt.Errorf("plugin %s (%s): start: %w", id, f.Path, ctx.Err())
	}
}

var pluginVersionRe = regexp.MustCompile(`Plugin version: (\d+)`)

// startError names the plugin and turns go-plugin's start errors into
// classed, readable ones.
func (h *Host) startError(f Found, err error) error {
	id, msg := f.ID(), err.Error()
	switch {
	case strings.Contains(msg, "incompatible API version"):
		theirs := "unknown"
		if m := pluginVersionRe.FindStringSubmatch(msg); m != nil {
			theirs = m[1]
		}
		return fmt.Errorf("plugin %s (%s) speaks plugin protocol version %s, this docker-gordon speaks version %d: %w",
			id, f.Path, theirs, wire.ProtocolVersion, core.ErrPluginExited)
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return fmt.Errorf("plugin %s (%s) did not complete its handshake within %s: %w",
			id, f.Path, h.cfg.StartTimeout, core.ErrUnavailable)
	case strings.Contains(msg, "plugin exited before we could connect"):
		return fmt.Errorf("plugin %s (%s) exited before completing its handshake (see its stderr with --debug): %w",
			id, f.Path, core.ErrPluginExited)
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		line := strings.SplitN(strings.TrimPrefix(msg, "Unrecognized remote plugin message: "), "\n", 2)[0]
		return fmt.Errorf("plugin %s (%s) broke the handshake: unexpected output on stdout %q: %w",
			id, f.Path, line, core.ErrPluginExited)
	}
	if errors.Is(err, core.ErrPluginExited) || errors.Is(err, core.ErrUnavailable) {
		return fmt.Errorf("plugin %s (%s): %w", id, f.Path, err)
	}
	return fmt.Errorf("plugin %s (%s): %w: %w", id, f.Path, core.ErrPluginExited, err)
}

// pluginEnv is the host environment, then HostConfig.Env, then TMPDIR (go-
// plugin puts its unix sockets there, so it must exist) and, for built-ins,
// GORDON_PLUGIN. Later entries win.
func (h *Host) pluginEnv(f Found, sockDir string) []string {
	env := append(os.Environ(), h.cfg.Env...)
	if dir := pluginTempDir(); dir != "" {
		env = append(env, "TMPDIR="+dir)
	}
	env = append(env, plugin.EnvUnixSocketDir+"="+sockDir)
	if f.Builtin {
		env = append(env, EnvPlugin+"="+f.ID())
	} else {
		env = append(env, EnvPlugin+"=")
	}
	return env
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
