package remote

// The runner side of a remote verb, and the bundle the CLI sends it: the
// runner reads the bundle from its stdin before the CLI framework starts,
// writes the files under RunnerInputDir, keeps registry credentials in
// memory only, and then watches stdin: its end (the CLI's Ctrl-C, a kill of
// the CLI, a lost connection) is SIGTERM to itself, which interrupts the
// verb as it interrupts a local one (SPEC R45–R48 converge the rest).

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"github.com/distribution/reference"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Runner environment (set by Run on the runner container).
const (
	RunnerEnv        = "GORDON_RUNNER"         // "1" in a runner container
	RunnerEngineEnv  = "GORDON_RUNNER_ENGINE"  // the engine as the CLI names it
	RunnerContextEnv = "GORDON_RUNNER_CONTEXT" // the CLI's context name
	RunnerInputDir   = "/tmp/gordon-in"        // where bundle files land

	// maxBundle bounds the bundle (manifest, plugins, stdin).
	maxBundle = 512 << 20
)

// Bundle is what the CLI sends the runner: one big-endian uint64
// length, then this as JSON, on the container's stdin.
type Bundle struct {
	// Files are written under RunnerInputDir at Path (relative, slash
	// separated) with Mode.
	Files []File `json:"files,omitempty"`
	// Stdin is the verb's standard input (secrets set).
	Stdin []byte `json:"stdin,omitempty"`
	// RegistryAuth maps a registry host ("docker.io", "127.0.0.1:5000")
	// to its X-Registry-Auth value, resolved by the CLI from its own
	// credentials (SPEC R13, S26). Held in memory only.
	RegistryAuth map[string]string `json:"registry_auth,omitempty"`
	// Secrets are the values of a compose project's file: and
	// environment: secrets, read by the CLI, which deploy stores in the
	// server's secret store before the revision (as a local deploy of the
	// compose project does). Held in memory only: never a bundle file.
	Secrets []SecretValue `json:"secrets,omitempty"`
}

// SecretValue is one secret to store for the deployed app: Service
// (core.AppWideSecrets for an app-wide one), Name, and the raw Value.
type SecretValue struct {
	Service string `json:"service"`
	Name    string `json:"name"`
	Value   []byte `json:"value"`
}

// File is one file of a Bundle.
type File struct {
	Path string      `json:"path"`
	Mode os.FileMode `json:"mode"`
	Data []byte      `json:"data"`
}

// WriteBundle writes b to w as ReadBundle reads it.
func WriteBundle(w io.Writer, b Bundle) error {
	data, err := json.Marshal(b)
	if err != nil {
		return err
	}
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(data)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// ReadBundle reads a bundle from r; one over 512 MiB is refused
// (core.ErrInvalid).
func ReadBundle(r io.Reader) (Bundle, error) {
	var b Bundle
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return b, fmt.Errorf("read the bundle length: %w", err)
	}
	size := binary.BigEndian.Uint64(n[:])
	if size > maxBundle {
		return b, fmt.Errorf("bundle of %d bytes exceeds %d: %w", size, maxBundle, core.ErrInvalid)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return b, fmt.Errorf("read the bundle: %w", err)
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("decode the bundle: %w", err)
	}
	return b, nil
}

// Session is what a runner container holds from the CLI's bundle: the
// registry credentials (in memory only), the values of a compose project's
// secrets, and the engine and context as the CLI names them.
type Session struct {
	Auth    map[string]string
	Secrets []SecretValue
	Engine  string
	Context string
}

// current is the runner's session: nil but in a runner container, where
// StartSession sets it once, before the CLI starts.
var current *Session

// Current is the runner's session (StartSession), or nil outside a runner
// container.
func Current() *Session { return current }

// StartSession is called by main when GORDON_RUNNER=1: it takes the bundle
// from stdin, writes its files under RunnerInputDir, gives the verb the
// bundle's stdin as os.Stdin and arms the stdin watchdog (WatchControl).
// The session is Current from then on.
func StartSession() (*Session, error) {
	b, err := ReadBundle(os.Stdin)
	if err != nil {
		return nil, fmt.Errorf("docker gordon runner: %w", err)
	}
	for _, f := range b.Files {
		clean := path.Clean("/" + f.Path)
		dst := filepath.Join(RunnerInputDir, filepath.FromSlash(clean))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst, f.Data, f.Mode.Perm()); err != nil {
			return nil, err
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() {
		_, _ = pw.Write(b.Stdin)
		pw.Close()
	}()
	control := os.Stdin
	os.Stdin = pr
	go WatchControl(control, Silence)
	current = &Session{Auth: b.RegistryAuth, Secrets: b.Secrets, Engine: os.Getenv(RunnerEngineEnv), Context: os.Getenv(RunnerContextEnv)}
	return current, nil
}

// Heartbeats on the runner's stdin: the CLI writes one byte every
// Heartbeat; a runner that hears nothing for Silence (a
// connection dropped without a reset) stops as on Ctrl-C.
const (
	Heartbeat = 5 * time.Second
	Silence   = 20 * time.Second
)

// WatchControl SIGTERMs this process when control ends or stays silent for
// silence; a signal context then interrupts the verb (the CLI's setup).
func WatchControl(control io.Reader, silence time.Duration) {
	beats := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := control.Read(buf); err != nil {
				close(beats)
				return
			}
			select {
			case beats <- struct{}{}:
			default:
			}
		}
	}()
	timer := time.NewTimer(silence)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-beats:
			if !ok {
				_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
				return
			}
			timer.Reset(silence)
		case <-timer.C:
			fmt.Fprintf(os.Stderr, "docker gordon runner: no word from the CLI for %s (connection lost?): stopping as on Ctrl-C\n", silence)
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
			return
		}
	}
}

// RegistryHost is the registry part of an image reference ("docker.io" for
// Docker Hub images).
func RegistryHost(ref string) string {
	n, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ""
	}
	return reference.Domain(n)
}

// ProjectFiles are the bundle files of spec's project files (SPEC R82,
// read by the CLI's loader): each at dir/<its source>, so that the
// runner's loader, reading the manifest written in dir, finds the same
// bytes at the same relative paths (a file two configs name is sent
// once). The files travel with the deploy; nothing is read on the server.
func ProjectFiles(spec core.AppSpec, dir string) []File {
	var out []File
	seen := map[string]bool{}
	for _, s := range spec.Services {
		for _, c := range s.Configs {
			p := path.Join(dir, c.Source)
			if seen[p] || c.Data == nil {
				continue
			}
			seen[p] = true
			out = append(out, File{Path: p, Mode: os.FileMode(c.Mode).Perm(), Data: c.Data})
		}
	}
	return out
}
