package volsnap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// DumpRequest is one online dump of a service ([services.X.backup]
// command, docs/data.md).
type DumpRequest struct {
	App, Service string
	// Container is the serving (running) container the command runs in.
	Container string
	Command   []string
	// Timeout bounds the command (0: snapshot.DefaultDumpTimeout).
	Timeout time.Duration
	// Keep is the retention of the service's scheduled backups.
	Keep int
	// Manual marks a dump taken on demand (`snapshots create`): trigger
	// manual and verb snapshot, and no retention. Else it is a scheduled
	// backup's (trigger backup, verb backup).
	Manual bool
	// Op and Revision name the op that takes it and the revision served.
	Op, Revision string
	// Secrets are the service's secret values, masked in what an error
	// quotes of the command's output.
	Secrets []string
}

// A failed dump's error quotes the command's last dumpStderrLines stderr
// lines, each cut at dumpLineMax bytes.
const (
	dumpStderrLines = 5
	dumpLineMax     = 300
)

// Dump takes an online dump: req.Command runs by exec in the running
// container, with no stop and no hold, and its stdout is stored, zstd
// compressed and hashed on the way, as a snapshot (trigger backup, or
// manual for req.Manual) whose manifest names the command; then the
// retention of scheduled backups by req.Keep. A command
// that exits non-zero, outlives its timeout or cannot start fails the
// dump with its last stderr lines, and nothing is kept. A runtime that
// cannot stream a command's output fails it (core.ErrUnavailable).
func Dump(ctx context.Context, e *steps.Engine, req DumpRequest) (Result, error) {
	start := time.Now()
	what := fmt.Sprintf("online dump of service %s (%s)", req.Service, strings.Join(req.Command, " "))
	if e.Snapshots == nil {
		return Result{}, fmt.Errorf("%s: %w: this engine keeps no snapshots", what, core.ErrUnavailable)
	}
	ex, ok := e.Runtime.(snapshot.StreamExecer)
	if !ok {
		return Result{}, dumpUnsupported(what, req.Service)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = snapshot.DefaultDumpTimeout
	}
	trigger, verb := snapshot.TriggerBackup, "backup"
	if req.Manual {
		trigger, verb = snapshot.TriggerManual, "snapshot"
	}
	w, err := e.Snapshots.Begin(snapshot.Manifest{ID: e.Snapshots.NewID(req.Service), App: req.App, Service: req.Service,
		Trigger: trigger, Op: req.Op, Verb: verb, Revision: req.Revision, Container: req.Container,
		Command: req.Command, CreatedAt: e.Now()})
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", what, err)
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		mu     sync.Mutex
		stderr []string
	)
	_, err = w.AddDump(func(out io.Writer) error {
		head := &headWriter{w: out}
		code, err := ex.ExecStream(dctx, req.Container, core.ExecSpec{Cmd: req.Command}, head, func(line string) {
			line = quoteLine(line, req.Secrets)
			mu.Lock()
			defer mu.Unlock()
			stderr = append(stderr, line)
			if len(stderr) > dumpStderrLines {
				stderr = stderr[1:]
			}
		})
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("%w: it did not finish within its timeout %s, and the engine cannot stop a command it runs in a container, so it may still be running there (restarting the service ends it); raise [services.%s.backup] timeout, or make the command end sooner", core.ErrConflict, timeout, req.Service)
		case err != nil:
			return err
		case (code == 126 || code == 127) && len(stderr) == 0:
			// The engine's own "exec failed" reason comes on stdout: the
			// program never ran, so nothing of a dump is quoted.
			msg := fmt.Sprintf("the command could not be started in the container (status %d: its program is missing or not executable there)", code)
			if line := head.firstLine(); line != "" {
				msg += ": " + quoteLine(line, req.Secrets)
			}
			return fmt.Errorf("%w: %s", core.ErrConflict, msg)
		case code != 0:
			msg := fmt.Sprintf("the command exited with status %d", code)
			if len(stderr) > 0 {
				msg += ": " + strings.Join(stderr, " | ")
			}
			return fmt.Errorf("%w: %s", core.ErrConflict, msg)
		case head.n == 0:
			return fmt.Errorf("%w: the command exited 0 but wrote nothing on its standard output: a dump must be written there, not to a file (for pg_dumpall, leave out -f)", core.ErrConflict)
		}
		return nil
	})
	if err != nil {
		_ = w.Abort()
		if errors.Is(err, errors.ErrUnsupported) {
			return Result{}, dumpUnsupported(what, req.Service)
		}
		return Result{}, fmt.Errorf("%s in container %s: %w", what, readiness.ShortID(req.Container), err)
	}
	m := w.Manifest()
	m.Duration = core.Duration(time.Since(start))
	if m, err = w.Commit(m); err != nil {
		_ = w.Abort()
		return Result{}, err
	}
	res := Result{Manifest: m, Record: RecordOf(m)}
	if req.Manual {
		return res, nil
	}
	if removed, err := e.Snapshots.Retain(req.App, req.Service, snapshot.TriggerBackup, req.Keep); err == nil {
		res.Removed = removed
	} else {
		res.Warning = fmt.Sprintf("service %s: backup retention: %v", req.Service, err)
	}
	return res, nil
}

func dumpUnsupported(what, service string) error {
	return fmt.Errorf("%s: %w: this container runtime cannot stream a command's output; remove command from [services.%s.backup] to back up by snapshot", what, core.ErrUnavailable, service)
}

// DumpStep is Dump journaled as step service.<service>.dump (pending
// while it runs, then succeeded with its record, or failed).
func DumpStep(ctx context.Context, e *steps.Engine, j Journal, req DumpRequest) (*snapshot.Manifest, Result, error) {
	i := j.begin(e, steps.ServiceStepID(req.Service, "dump"), req.Service,
		fmt.Sprintf("online dump by %q in %s", strings.Join(req.Command, " "), readiness.ShortID(req.Container)))
	res, err := Dump(ctx, e, req)
	if err != nil {
		j.end(e, i, nil, "", err)
		return nil, res, err
	}
	j.end(e, i, &res.Record, fmt.Sprintf("snapshot %s: a dump of %d bytes (%d stored) in %s", res.Manifest.ID,
		res.Record.Size, res.Record.Stored, res.Record.Duration.D().Round(time.Millisecond)), nil)
	return &res.Manifest, res, nil
}

// DumpNotRestorable is the refusal (core.ErrInvalid) to restore online
// dump m into volumes: it says how to load it back.
func DumpNotRestorable(m snapshot.Manifest) error {
	return fmt.Errorf("%w: snapshot %s is an online dump by `%s`, not a copy of the volumes' files, so it cannot be restored into them; "+
		"write it out with `docker gordon snapshots export %s %s --dump > dump.out` and load it with the program's own tool (for pg_dumpall: psql -f dump.out)",
		core.ErrInvalid, m.ID, strings.Join(m.Command, " "), m.App, m.ID)
}

// headWriter passes writes to w and keeps their first headMax bytes: a
// command that fails at once often says why on its standard output (the
// engine's own "exec failed" does).
type headWriter struct {
	w    io.Writer
	head []byte
	n    int64
}

const headMax = 512

func (h *headWriter) Write(p []byte) (int, error) {
	if n := min(headMax-len(h.head), len(p)); n > 0 {
		h.head = append(h.head, p[:n]...)
	}
	h.n += int64(len(p))
	return h.w.Write(p)
}

// firstLine is the first line of what was written, trimmed, if it is
// printable text.
func (h *headWriter) firstLine() string {
	line, _, _ := strings.Cut(string(h.head), "\n")
	line = strings.TrimSpace(line)
	if !utf8.ValidString(line) || strings.ContainsRune(line, 0) {
		return ""
	}
	return line
}

// quoteLine is one line of a command's output as an error may quote it:
// its secret values masked, cut at dumpLineMax bytes.
func quoteLine(line string, secrets []string) string {
	line = steps.DpRedact(line, secrets)
	if len(line) > dumpLineMax {
		line = strings.ToValidUTF8(line[:dumpLineMax], "") + "…"
	}
	return line
}
