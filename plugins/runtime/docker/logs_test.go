package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func collectLogs(t *testing.T, r *Runtime, id string, opts core.LogOptions) []core.LogLine {
	t.Helper()
	var lines []core.LogLine
	err := r.Logs(ctxT(t, 20*time.Second), id, opts, func(l core.LogLine) error {
		lines = append(lines, l)
		return nil
	})
	require.NoError(t, err)
	return lines
}

func texts(lines []core.LogLine) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Text
	}
	return out
}

func TestRuntime_LogsTailSinceAndCallbackError(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	id := f.createStart(f.httpdSpec("logs", "VERSION=logv"))
	binds, err := f.r.BackendBinds(ctx, id, []core.PortSpec{{Port: 8080}})
	require.NoError(t, err)
	get(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", binds[0].HostPort))
	require.NoError(t, f.r.StopContainer(ctx, id, 5*time.Second))

	all := collectLogs(t, f.r, id, core.LogOptions{})
	require.Equal(t, []string{"listening on :8080 (version logv)", "received terminated, draining for 0s", "stopped"}, texts(all))
	for _, l := range all {
		assert.Equal(t, "stderr", l.Stream) // the log package writes to stderr
		assert.False(t, l.Time.IsZero())
		assert.WithinDuration(t, time.Now(), l.Time, time.Minute)
	}

	tail := collectLogs(t, f.r, id, core.LogOptions{Tail: 1})
	assert.Equal(t, []string{"stopped"}, texts(tail))

	since := collectLogs(t, f.r, id, core.LogOptions{Since: all[1].Time})
	assert.Equal(t, []string{"received terminated, draining for 0s", "stopped"}, texts(since))

	none := collectLogs(t, f.r, id, core.LogOptions{Since: time.Now().Add(time.Hour)})
	assert.Empty(t, none)

	stop := errors.New("enough")
	calls := 0
	err = f.r.Logs(ctx, id, core.LogOptions{}, func(core.LogLine) error { calls++; return stop })
	assert.Same(t, stop, err)
	assert.Equal(t, 1, calls)
}

func TestRuntime_LogsFollowUntilContextDone(t *testing.T) {
	f := newFixture(t)
	id := f.createStart(f.httpdSpec("follow", "VERSION=fol"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	err := f.r.Logs(ctx, id, core.LogOptions{Follow: true}, func(l core.LogLine) error {
		got = append(got, l.Text)
		if strings.HasPrefix(l.Text, "listening on") {
			cancel()
		}
		return nil
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, got, "listening on :8080 (version fol)")
}
