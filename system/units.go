package system

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// ReconcileOptions are the reconcile loop's settings: the time between
// its passes (0: the verb's default) and whether it starts stopped apps
// at boot (--boot, when this build's reconcile verb has that flag).
type ReconcileOptions struct {
	Interval time.Duration
	Boot     bool
	// Dashboard, if set, is the loopback address on the engine's host
	// where the loop also serves the read-only dashboard (reconcile
	// --dashboard); a non-loopback one is core.ErrInvalid.
	Dashboard string
}

// ReconcileUnit is the gordon-reconcile system container: this binary run
// directly (not through the docker CLI) as `docker-gordon gordon reconcile
// --watch [--boot]`, talking to the engine through the bind-mounted socket.
// dockerHost is the engine endpoint the CLI uses (DOCKER_HOST form); a unix
// socket is mounted at /var/run/docker.sock, a tcp:// endpoint is used as is
// (host network); anything else (ssh://, TLS) is core.ErrInvalid.
func ReconcileUnit(stateDir, dockerHost string, o ReconcileOptions) (docker.Unit, error) {
	if host, _, err := net.SplitHostPort(o.Dashboard); o.Dashboard != "" && (err != nil || host != "localhost" && !net.ParseIP(host).IsLoopback()) {
		return docker.Unit{}, fmt.Errorf("--dashboard %s: the reconcile container serves the dashboard without a token, so on a loopback HOST:PORT only (for example 127.0.0.1:9190); nothing was changed: %w", o.Dashboard, core.ErrInvalid)
	}
	self, err := os.Executable()
	if err != nil {
		return docker.Unit{}, fmt.Errorf("find own executable: %w", err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return docker.Unit{}, fmt.Errorf("own executable: %w", err)
	}
	env := []string{
		"GORDON_STATE_DIR=" + stateDir,
		"TMPDIR=/tmp",
		"HOME=/tmp",
		"DOCKER_CONFIG=/tmp/.docker",
	}
	binds := []string{stateDir + ":" + stateDir}
	var groups []string
	switch {
	case dockerHost == "" || strings.HasPrefix(dockerHost, "unix://"):
		sock := strings.TrimPrefix(dockerHost, "unix://")
		if sock == "" {
			sock = "/var/run/docker.sock"
		}
		fi, err := os.Stat(sock)
		if err != nil {
			return docker.Unit{}, fmt.Errorf("docker socket %s: %w: %w", sock, core.ErrUnavailable, err)
		}
		binds = append(binds, sock+":"+docker.DockerSock)
		env = append(env, "DOCKER_HOST=unix://"+docker.DockerSock)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() != 0 {
			groups = append(groups, fmt.Sprint(st.Gid))
		}
	case strings.HasPrefix(dockerHost, "tcp://") && os.Getenv("DOCKER_TLS_VERIFY") == "":
		env = append(env, "DOCKER_HOST="+dockerHost)
	default:
		return docker.Unit{}, fmt.Errorf("engine endpoint %s: the reconcile container supports a local unix socket or plain tcp:// only: %w", dockerHost, core.ErrInvalid)
	}
	cmd := []string{"gordon", "reconcile", "--watch"}
	if o.Interval > 0 {
		cmd = append(cmd, "--interval", o.Interval.String())
	}
	if o.Boot {
		cmd = append(cmd, "--boot")
	}
	if o.Dashboard != "" {
		cmd = append(cmd, "--dashboard", o.Dashboard)
	}
	return docker.Unit{
		Kind:       "reconcile",
		Name:       docker.ReconcileName,
		Binaries:   map[string]string{"/docker-gordon": self},
		Entrypoint: []string{"/docker-gordon"},
		Cmd:        cmd,
		Env:        env,
		Binds:      binds,
		User:       ContainerUser(),
		GroupAdd:   groups,
		StateDir:   stateDir,
		StopGrace:  30 * time.Second,
	}, nil
}

// EnsureStateDir creates the state directory (mode 0700) so Docker does
// not create the bind source itself.
func EnsureStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	return nil
}

// ContainerUser runs system containers as the invoking user when it is not
// root, so files they write in the state directory stay the user's.
func ContainerUser() string {
	if os.Geteuid() == 0 {
		return ""
	}
	return fmt.Sprintf("%d:%d", os.Geteuid(), os.Getegid())
}

// PrintStart reports what docker.Ensure did.
func PrintStart(w io.Writer, name string, r docker.Result) {
	fmt.Fprintf(w, "%s: %s (%s, image %s)\n", name, r.Action, shortID(r.ID), r.Image)
}

// maxCertFile bounds a certificate or key file read by certs add and --acme-ca-root.
const maxCertFile = 1 << 20

// ReadCertFile reads the PEM file a --FLAG names (at most maxCertFile
// bytes); a missing, unreadable or larger file is core.ErrInvalid naming
// the flag.
func ReadCertFile(flag, path string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: --%s FILE is required", core.ErrInvalid, flag)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --%s: %w", core.ErrInvalid, flag, err)
	}
	if fi.Size() > maxCertFile {
		return nil, fmt.Errorf("%w: --%s %s: larger than %d bytes", core.ErrInvalid, flag, path, maxCertFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --%s: %w", core.ErrInvalid, flag, err)
	}
	return b, nil
}

// shortID is the first 12 characters of a Docker ID (without "sha256:").
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// orDash is s, or "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
