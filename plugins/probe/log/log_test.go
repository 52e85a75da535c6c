package logprobe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	logprobe "github.com/gordon-deploy/docker-gordon/plugins/probe/log"
)

// logRuntime is a core.Runtime whose only working method is Logs: it emits
// the lines appended so far (filtered by Since like a real engine) and
// records the options of every call.
type logRuntime struct {
	core.Runtime // nil: any other method panics
	mu           sync.Mutex
	lines        map[string][]core.LogLine
	calls        []core.LogOptions
	err          error
}

func (r *logRuntime) add(id string, at time.Time, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lines == nil {
		r.lines = map[string][]core.LogLine{}
	}
	r.lines[id] = append(r.lines[id], core.LogLine{Time: at, Stream: "stdout", Text: text})
}

func (r *logRuntime) Logs(ctx context.Context, id string, opts core.LogOptions, fn func(core.LogLine) error) error {
	r.mu.Lock()
	r.calls = append(r.calls, opts)
	lines, ok := r.lines[id]
	lines = append([]core.LogLine(nil), lines...)
	err := r.err
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: container %s", core.ErrNotFound, id)
	}
	// Like the engine, "since" has one-second granularity.
	since := opts.Since.Truncate(time.Second)
	for _, l := range lines {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if l.Time.Before(since) {
			continue
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	return nil
}

var t0 = time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)

func logReq(id string, started time.Time, pattern string) core.ProbeRequest {
	return core.ProbeRequest{
		Target:    core.ProbeTarget{App: "blog", Service: "worker", ContainerID: id, StartedAt: started},
		Readiness: core.Readiness{Type: core.ReadinessLog, Pattern: pattern},
	}
}

func TestR34_LogPatternFoundSinceStart(t *testing.T) {
	rt := &logRuntime{}
	start := t0.Add(2 * time.Second)
	rt.add("c-new", start.Add(-logprobe.StartSkew-100*time.Millisecond), "server ready (previous execution)")
	rt.add("c-new", start.Add(time.Second), "booting")
	p := logprobe.New(rt)

	res, err := p.Check(context.Background(), logReq("c-new", start, "server ready"))
	require.NoError(t, err)
	assert.False(t, res.Ready, "a line from before the execution start does not count")
	assert.Contains(t, res.Detail, `pattern "server ready" not in logs`)

	rt.add("c-new", start.Add(2*time.Second), "level=info msg=\"server ready on :8080\"")
	res, err = p.Check(context.Background(), logReq("c-new", start, "server ready"))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)

	require.Len(t, rt.calls, 2)
	for _, c := range rt.calls {
		assert.Equal(t, start.Add(-logprobe.StartSkew), c.Since, "scan since the execution start, less the skew")
		assert.False(t, c.Follow)
	}
}

// A fast process logs its readiness line a few milliseconds before the
// engine records the execution's start time (seen on Docker 20.10): the
// line still belongs to this execution.
func TestR34_LineJustBeforeRecordedStartCounts(t *testing.T) {
	rt := &logRuntime{}
	start := t0.Add(2 * time.Second)
	rt.add("c-new", start.Add(-3*time.Millisecond), "ready: listening on :8080")
	res, err := logprobe.New(rt).Check(context.Background(), logReq("c-new", start, "ready"))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)
}

func TestR34_NoStartTimeFailsClosed(t *testing.T) {
	rt := &logRuntime{}
	rt.add("c-new", t0, "server ready")
	res, err := logprobe.New(rt).Check(context.Background(), logReq("c-new", time.Time{}, "server ready"))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Equal(t, "no start time: log probe fails closed", res.Detail)
	assert.Empty(t, rt.calls, "logs not even read")
}

func TestR34_EmptyPatternNotReady(t *testing.T) {
	rt := &logRuntime{}
	rt.add("c-new", t0, "anything")
	res, err := logprobe.New(rt).Check(context.Background(), logReq("c-new", t0, ""))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Contains(t, res.Detail, "pattern")
}

func TestR34_LogReadErrorNotReady(t *testing.T) {
	res, err := logprobe.New(&logRuntime{}).Check(context.Background(), logReq("c-gone", t0, "ready"))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Contains(t, res.Detail, "c-gone")
	assert.Contains(t, res.Detail, "not found")
}

func TestR34_CallerContextReturned(t *testing.T) {
	rt := &logRuntime{err: context.Canceled}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := logprobe.New(rt).Check(ctx, logReq("c-new", t0, "ready"))
	require.ErrorIs(t, err, context.Canceled)
}

func TestR34_WaiterRereadsUntilPatternAppears(t *testing.T) {
	rt := &logRuntime{}
	start := time.Now()
	rt.add("c-new", start, "booting")
	var once sync.Once
	appear := func(engine.WaitResult) { // after an attempt that did not find it
		once.Do(func() { rt.add("c-new", time.Now(), "ready to accept connections") })
	}
	w := &engine.ReadinessWaiter{Probes: probeSet{logprobe.New(rt)}, LogInterval: 50 * time.Millisecond}
	res, err := w.Wait(context.Background(), logReq("c-new", start, "ready to accept").Target,
		core.Readiness{Type: core.ReadinessLog, Pattern: "ready to accept", Timeout: core.Duration(5 * time.Second)}, appear)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, res.Attempts, 2)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestR34_WaiterTimesOutWithoutPattern(t *testing.T) {
	rt := &logRuntime{}
	rt.add("c-new", time.Now(), "booting")
	w := &engine.ReadinessWaiter{Probes: probeSet{logprobe.New(rt)}, LogInterval: 50 * time.Millisecond}
	_, err := w.Wait(context.Background(), logReq("c-new", time.Now(), "ready").Target,
		core.Readiness{Type: core.ReadinessLog, Pattern: "ready", Timeout: core.Duration(200 * time.Millisecond)}, nil)
	require.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), `log readiness timeout after 200ms: pattern "ready"`)
}

func TestR34_DescribeAndValidate(t *testing.T) {
	p := logprobe.New(&logRuntime{})
	info, err := p.Describe(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "log", info.Name)
	assert.Equal(t, 1, info.Protocol)
	msgs, err := p.ValidateConfig(context.Background(), json.RawMessage(`{}`))
	require.NoError(t, err)
	assert.Empty(t, msgs)
	msgs, err = p.ValidateConfig(context.Background(), json.RawMessage(`[1]`))
	require.NoError(t, err)
	assert.Len(t, msgs, 1)
}

type probeSet struct{ p core.Prober }

func (s probeSet) Prober(context.Context, string, string) (core.Prober, error) { return s.p, nil }
