// Package logprobe is the built-in "log" readiness backend (SPEC R34): one
// scan of the container's logs since its execution start per Check. The
// engine (core/engine's ReadinessWaiter) re-reads every 1 s until the budget.
package logprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Protocol is the probe plugin protocol version this backend speaks.
const Protocol = 1

// DetailNoStartTime is the not-ready detail of a target without an
// execution start time: the log probe fails closed (R34).
const DetailNoStartTime = "no start time: log probe fails closed"

// errFound stops the log scan once the pattern is seen.
var errFound = errors.New("readiness pattern found")

// Prober is the log readiness backend over a runtime's Logs.
type Prober struct {
	rt core.Runtime
}

// Interface guard.
var _ core.Prober = (*Prober)(nil)

// New returns the log prober reading logs through rt.
func New(rt core.Runtime) core.Prober { return &Prober{rt: rt} }

// Describe returns name "log", protocol 1.
func (p *Prober) Describe(ctx context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: core.ReadinessLog, Protocol: Protocol}, nil
}

// ValidateConfig accepts only an empty config (absent, null or {}).
func (p *Prober) ValidateConfig(ctx context.Context, config json.RawMessage) ([]string, error) {
	if len(config) == 0 {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(config, &m); err != nil {
		return []string{fmt.Sprintf("log probe: config is not a JSON object: %v", err)}, nil
	}
	if len(m) > 0 {
		return []string{fmt.Sprintf("log probe takes no config (got %d keys)", len(m))}, nil
	}
	return nil, nil
}

// StartSkew is how far before the recorded start time a log line may be
// stamped and still belong to the current execution (seen here: a process
// logging "ready" a few milliseconds before Docker's StartedAt).
const StartSkew = time.Second

// Check scans the logs of req.Target.ContainerID since req.Target.StartedAt
// (no follow) for the substring req.Readiness.Pattern; ready when a line
// contains it. Lines stamped more than StartSkew before StartedAt are
// ignored (a restarted container keeps its earlier output); lines within
// StartSkew before it count, because the engine records StartedAt after the
// process is already running, and a fast process logs first. Not ready: zero StartedAt ("no start time:
// log probe fails closed", R34), empty pattern, pattern not seen yet, or a
// log read error (container gone: its text). ctx ending returns ctx's
// error. A nil runtime is an error wrapping core.ErrUnavailable.
func (p *Prober) Check(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
	if err := ctx.Err(); err != nil {
		return core.ProbeResult{}, err
	}
	t := req.Target
	if t.StartedAt.IsZero() {
		return core.ProbeResult{Ready: false, Detail: DetailNoStartTime}, nil
	}
	pattern := req.Readiness.Pattern
	if pattern == "" {
		return core.ProbeResult{Ready: false, Detail: "no pattern: declare readiness.pattern for a log probe"}, nil
	}
	if p.rt == nil {
		return core.ProbeResult{}, fmt.Errorf("%w: log probe of app %s service %s: no runtime", core.ErrUnavailable, t.App, t.Service)
	}
	var at time.Time
	since := t.StartedAt.Add(-StartSkew)
	err := p.rt.Logs(ctx, t.ContainerID, core.LogOptions{Since: since}, func(l core.LogLine) error {
		if !l.Time.IsZero() && l.Time.Before(since) {
			return nil
		}
		if strings.Contains(l.Text, pattern) {
			at = l.Time
			return errFound
		}
		return nil
	})
	if errors.Is(err, errFound) {
		return core.ProbeResult{Ready: true, Detail: fmt.Sprintf("log line %q seen at %s", pattern, at.UTC().Format(time.RFC3339Nano))}, nil
	}
	if ctx.Err() != nil {
		return core.ProbeResult{}, ctx.Err()
	}
	if err != nil {
		return core.ProbeResult{Ready: false, Detail: fmt.Sprintf("reading logs of container %s: %v", t.ContainerID, err)}, nil
	}
	return core.ProbeResult{Ready: false, Detail: fmt.Sprintf("pattern %q not in logs since %s", pattern, t.StartedAt.UTC().Format(time.RFC3339))}, nil
}
