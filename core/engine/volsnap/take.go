package volsnap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// Request is one snapshot of a service's volumes.
type Request struct {
	App, Service string
	// Container is the stopped container the volumes are read from; it
	// mounts Volumes (its own spec's).
	Container string
	Volumes   []core.VolumeMount
	// Policy is snapshot.PolicyAuto (a total above snapshot.AutoLimit is
	// skipped with a warning) or snapshot.PolicyAlways.
	Policy string
	// Keep is the retention of (Service, Trigger) applied after the
	// snapshot is stored (0 keeps every one).
	Keep int
	// Trigger is a snapshot.Trigger constant; Op, Verb and Revision name
	// the op that takes it and the revision that wrote the data.
	Trigger, Op, Verb, Revision string
}

// Result is what Take did. Warning, when set, says in the user's words why
// no snapshot was taken (Record.Skipped the short reason); the caller
// goes on.
type Result struct {
	Manifest snapshot.Manifest
	Record   Record
	Warning  string
	// Removed are the snapshots the retention removed.
	Removed []string
}

// errTooLarge stops an auto snapshot at the size bound.
var errTooLarge = errors.New("the volumes hold more than the auto snapshot bound")

// Take snapshots every volume of req into e.Snapshots: each volume's tar,
// read through the runtime's archive API from the stopped container,
// compressed into one file, then the manifest (the commit point). It
// returns an error when the snapshot failed (nothing partial is kept);
// an auto policy above snapshot.AutoLimit, a runtime that cannot
// export volumes under auto, and an engine without a store return no
// error and a Result without a snapshot (Warning says why).
func Take(ctx context.Context, e *steps.Engine, req Request) (Result, error) {
	start := time.Now()
	if e.Snapshots == nil || len(req.Volumes) == 0 {
		return Result{Record: Record{Skipped: "no snapshot store"}}, nil
	}
	va, ok := e.Runtime.(snapshot.Archiver)
	if !ok {
		return unsupported(req, nil)
	}
	w, err := e.Snapshots.Begin(snapshot.Manifest{ID: e.Snapshots.NewID(req.Service), App: req.App, Service: req.Service,
		Trigger: req.Trigger, Op: req.Op, Verb: req.Verb, Revision: req.Revision, Container: req.Container, CreatedAt: e.Now()})
	if err != nil {
		return Result{}, fmt.Errorf("snapshot of service %s: %w", req.Service, err)
	}
	limit := &limitWriter{max: -1}
	if req.Policy != snapshot.PolicyAlways {
		limit.max = snapshot.AutoLimit
	}
	for _, v := range req.Volumes {
		_, err := w.AddVolume(steps.VolumeName(req.App, v.Name), v.Path, func(out io.Writer) error {
			limit.w = out
			return va.ExportVolume(ctx, req.Container, v.Path, limit)
		})
		if err != nil {
			_ = w.Abort()
			switch {
			case errors.Is(err, errTooLarge):
				msg := fmt.Sprintf("service %s: no snapshot was taken before this replacement: its volumes hold more than %d MiB, the bound of before_deploy = \"auto\"; set [services.%s.snapshots] before_deploy = \"always\" to take one anyway, or \"never\" to silence this",
					req.Service, snapshot.AutoLimit>>20, req.Service)
				return Result{Record: Record{Skipped: "above the auto bound", Duration: core.Duration(time.Since(start))}, Warning: msg}, nil
			case errors.Is(err, errors.ErrUnsupported):
				return unsupported(req, err)
			}
			return Result{}, fmt.Errorf("snapshot of volume %s (%s) from container %s: %w", v.Name, v.Path, readiness.ShortID(req.Container), err)
		}
	}
	m := w.Manifest()
	m.Duration = core.Duration(time.Since(start))
	m, err = w.Commit(m)
	if err != nil {
		_ = w.Abort()
		return Result{}, err
	}
	res := Result{Manifest: m, Record: RecordOf(m)}
	if removed, err := e.Snapshots.Retain(req.App, req.Service, req.Trigger, req.Keep); err == nil {
		res.Removed = removed
	} else {
		res.Warning = fmt.Sprintf("service %s: snapshot retention: %v", req.Service, err)
	}
	return res, nil
}

// Record is what a snapshot or restore step did: the snapshot's id, the
// total tar size and the stored (compressed) size in bytes, each volume's
// digest ("<volume> sha256:<hex>"), how long it took, and why no snapshot
// was taken (Skipped). The journal keeps it in the step's detail, digest
// and phases.
type Record struct {
	ID       string
	Size     int64
	Stored   int64
	Digests  []string
	Duration core.Duration
	Skipped  string
}

// RecordOf is the journal's record of snapshot m.
func RecordOf(m snapshot.Manifest) Record {
	r := Record{ID: m.ID, Duration: m.Duration}
	for _, v := range m.Volumes {
		r.Size += v.Size
		r.Stored += v.Stored
		r.Digests = append(r.Digests, v.Name+" "+v.Digest)
	}
	return r
}

// unsupported is Take's answer for a runtime that cannot read volumes
// (why, when not nil, is the runtime's reason, quoted).
func unsupported(req Request, why error) (Result, error) {
	reason := "this container runtime cannot read volumes"
	if why != nil {
		reason += " (" + why.Error() + ")"
	}
	if req.Policy == snapshot.PolicyAlways {
		return Result{}, fmt.Errorf("snapshot of service %s: %w: %s; set [services.%s.snapshots] before_deploy = \"never\" or \"auto\"", req.Service, core.ErrUnavailable, reason, req.Service)
	}
	return Result{Record: Record{Skipped: "the runtime takes no snapshots"},
		Warning: fmt.Sprintf("service %s: no snapshot was taken before this replacement: %s", req.Service, reason)}, nil
}

// limitWriter passes writes to w until more than max bytes (max < 0: no
// bound) went through it in all, then fails with errTooLarge.
type limitWriter struct {
	w   io.Writer
	n   int64
	max int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.max >= 0 && l.n+int64(len(p)) > l.max {
		return 0, errTooLarge
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}
