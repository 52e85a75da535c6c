// Package logstream turns an engine's log stream (container or service
// logs asked for with timestamps) into core.LogLine values. The Docker and
// the Swarm runtime both stream their logs through Copy.
package logstream

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Copy reads rc, the engine's log stream (multiplexed stdout/stderr, or
// the raw terminal stream when tty), and hands fn one core.LogLine per
// line: Stream "stdout" or "stderr" ("stdout" for a tty), Time from the
// engine's RFC 3339 Nano prefix (zero when the line has none), Text without
// the prefix, the newline and a trailing CR. A last line without a newline
// is handed over at the end. It returns nil at the end of rc, fn's first
// error wrapped so that Callback finds it, or the read's error.
func Copy(rc io.Reader, tty bool, fn func(core.LogLine) error) error {
	stdout, stderr := &lineWriter{stream: "stdout", fn: fn}, &lineWriter{stream: "stderr", fn: fn}
	var err error
	if tty {
		_, err = io.Copy(stdout, rc)
	} else {
		_, err = stdcopy.StdCopy(stdout, stderr, rc)
	}
	if err == nil {
		if err = stdout.flush(); err == nil {
			err = stderr.flush()
		}
	}
	return err
}

// Callback returns fn's error when Copy's err is one (unchanged, as fn
// returned it), and ok false for a read error or nil.
func Callback(err error) (fnErr error, ok bool) {
	var ce callbackError
	if errors.As(err, &ce) {
		return ce.err, true
	}
	return nil, false
}

// ParseLine splits the RFC 3339 Nano timestamp prefix the engine adds from
// the text of one line (its CR dropped); a line without one keeps a zero
// time, and a line that is only a timestamp has empty text.
func ParseLine(line string) core.LogLine {
	line = strings.TrimSuffix(line, "\r")
	if ts, text, ok := strings.Cut(line, " "); ok {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return core.LogLine{Time: t.UTC(), Text: text}
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, line); err == nil {
		return core.LogLine{Time: t.UTC()}
	}
	return core.LogLine{Text: line}
}

// callbackError carries fn's error through stdcopy untouched.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// lineWriter splits one stream into lines and hands each to fn.
type lineWriter struct {
	stream string
	fn     func(core.LogLine) error
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if err := w.emit(line); err != nil {
			return 0, err
		}
	}
}

func (w *lineWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	line := string(w.buf)
	w.buf = nil
	return w.emit(line)
}

func (w *lineWriter) emit(line string) error {
	ll := ParseLine(line)
	ll.Stream = w.stream
	if err := w.fn(ll); err != nil {
		return callbackError{err}
	}
	return nil
}
