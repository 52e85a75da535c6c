package logstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Log lines ("TIMESTAMP text", as the engine sends them with timestamps)
// split into time and text, per stream of the multiplexed stream, a line
// split across frames whole, the last one without a newline kept.
func TestCopy_LinesSplitIntoTimeStreamAndText(t *testing.T) {
	var mux bytes.Buffer
	frame(&mux, stdcopy.Stderr, "2026-12-02T20:00:00.5Z exiting on SIGQUIT\n2026-12-02T20:00:01Z\n")
	frame(&mux, stdcopy.Stdout, "no stamp\r\n2026-12-02T20:00:02Z par")
	frame(&mux, stdcopy.Stdout, "tial")
	var got []core.LogLine
	require.NoError(t, Copy(&mux, false, func(l core.LogLine) error { got = append(got, l); return nil }))
	at := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	assert.Equal(t, []core.LogLine{
		{Time: at.Add(500 * time.Millisecond), Stream: "stderr", Text: "exiting on SIGQUIT"},
		{Time: at.Add(time.Second), Stream: "stderr"},
		{Stream: "stdout", Text: "no stamp"},
		{Time: at.Add(2 * time.Second), Stream: "stdout", Text: "partial"},
	}, got)
}

// frame appends one frame of the engine's multiplexed log stream: stream
// byte, three zero bytes, the payload's length (big-endian), the payload.
func frame(b *bytes.Buffer, stream stdcopy.StdType, payload string) {
	b.Write([]byte{byte(stream), 0, 0, 0})
	_ = binary.Write(b, binary.BigEndian, uint32(len(payload)))
	b.WriteString(payload)
}

// A tty's raw stream is all stdout.
func TestCopy_TTYStreamIsStdout(t *testing.T) {
	var got []core.LogLine
	require.NoError(t, Copy(bytes.NewBufferString("2026-12-02T20:00:00Z $ ls\n"), true, func(l core.LogLine) error { got = append(got, l); return nil }))
	require.Len(t, got, 1)
	assert.Equal(t, "stdout", got[0].Stream)
	assert.Equal(t, "$ ls", got[0].Text)
}

// fn's error stops the copy and comes back unchanged through Callback; a
// read error is no callback error.
func TestCopy_CallbackErrorComesBackUnchanged(t *testing.T) {
	stop := errors.New("enough")
	err := Copy(bytes.NewBufferString("x\ny\n"), true, func(core.LogLine) error { return stop })
	fnErr, ok := Callback(err)
	require.True(t, ok)
	assert.Equal(t, stop, fnErr)

	var mux bytes.Buffer
	mux.Write([]byte{9, 0, 0, 0, 0, 0, 0, 1, 'x'}) // stream 9: not a stdcopy stream
	err = Copy(&mux, false, func(core.LogLine) error { return nil })
	require.Error(t, err)
	_, ok = Callback(err)
	assert.False(t, ok)
}

func TestParseLine(t *testing.T) {
	l := ParseLine("2026-11-30T00:56:03.123456789Z hello world")
	assert.Equal(t, "hello world", l.Text)
	assert.Equal(t, 123456789, l.Time.Nanosecond())
	l = ParseLine("no timestamp")
	assert.Equal(t, "no timestamp", l.Text)
	assert.True(t, l.Time.IsZero())
}
