package swarm

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Service log lines ("TIMESTAMP text", as Swarm sends them with
// timestamps) split into time and text, across writes; fn's error stops
// the stream unchanged.
func TestSwarm_ServiceLogLinesSplitIntoTimeAndText(t *testing.T) {
	var got []core.LogLine
	w := &lineWriter{stream: "stderr", fn: func(l core.LogLine) error { got = append(got, l); return nil }}
	_, err := w.Write([]byte("2026-12-02T20:00:00.5Z exiting on SIGQUIT\n2026-12-02T20:00:01Z\nno stamp\r\n2026-12-02T20:00:02Z par"))
	require.NoError(t, err)
	_, err = w.Write([]byte("tial"))
	require.NoError(t, err)
	require.NoError(t, w.flush())
	at := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	assert.Equal(t, []core.LogLine{
		{Time: at.Add(500 * time.Millisecond), Stream: "stderr", Text: "exiting on SIGQUIT"},
		{Time: at.Add(time.Second), Stream: "stderr"},
		{Stream: "stderr", Text: "no stamp"},
		{Time: at.Add(2 * time.Second), Stream: "stderr", Text: "partial"},
	}, got)

	stop := errors.New("enough")
	w = &lineWriter{stream: "stdout", fn: func(core.LogLine) error { return stop }}
	_, err = w.Write([]byte("x\n"))
	var ce callbackError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, stop, ce.err)
}
