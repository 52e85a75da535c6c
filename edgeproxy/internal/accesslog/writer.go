package accesslog

import (
	"bytes"
	"io"
)

// bufSize is the access log's buffer: lines wait in it until the periodic
// flush or until it is full, and while writes fail it holds the lines to
// retry (newer lines are dropped, counted, once it is full).
const bufSize = 64 << 10

// queueLocked appends the whole line b to the buffer (a.mu held). A full
// buffer is written first, in one write of whole lines (a file shared with
// the edge of a hand-over, O_APPEND, or rotated never holds half a line),
// unless writes are failing: then only the periodic flush retries, and a
// line that does not fit is dropped and counted.
func (a *Log) queueLocked(b []byte) {
	if len(a.buf)+len(b) > cap(a.buf) && !a.failing {
		_ = a.flushLocked()
	}
	if len(a.buf)+len(b) > cap(a.buf) {
		if len(a.buf) > 0 || len(b) <= cap(a.buf) {
			a.dropped.Add(1)
			return
		}
		// A single line longer than the buffer goes out by itself.
		a.buf = append(a.buf, b...)
		_ = a.flushLocked()
		a.buf = a.buf[:0:bufSize]
		return
	}
	a.buf = append(a.buf, b...)
}

// flushLocked writes the buffered lines in one write (a.mu held). On an
// error the lines written whole leave the buffer and the rest stay for the
// next flush; the first error of a run is reported (SetReporter) and every
// failed write counted. A write that stopped inside a line (a short write
// the output could not undo, see rotatingFile) makes the next successful
// write start with a newline, so the torn part stays on a line of its own
// and the lines after it are whole.
func (a *Log) flushLocked() error {
	if len(a.buf) == 0 {
		return nil
	}
	if a.torn {
		if _, err := a.out.Write([]byte{'\n'}); err != nil {
			return a.failed(err)
		}
		a.torn = false
	}
	n, err := a.out.Write(a.buf)
	if err == nil && n == len(a.buf) {
		a.buf = a.buf[:0]
		if a.failing {
			a.failing = false
			a.reportf(nil)
		}
		return nil
	}
	if err == nil {
		err = io.ErrShortWrite
	}
	whole := bytes.LastIndexByte(a.buf[:n], '\n') + 1
	if whole < n {
		a.torn = true
	}
	a.buf = a.buf[:copy(a.buf, a.buf[whole:])]
	return a.failed(err)
}

// failed counts a failed write and reports the first of a run.
func (a *Log) failed(err error) error {
	a.errs.Add(1)
	if !a.failing {
		a.failing = true
		a.reportf(err)
	}
	return err
}

func (a *Log) reportf(err error) {
	if a.report != nil {
		a.report(err)
	}
}

// SetReporter makes report called when writes start failing (with the
// error) and when they succeed again (with nil): once per run of failures,
// not per write. It runs under the log's lock: it must not call the log.
// Call it before the first Write.
func (a *Log) SetReporter(report func(err error)) {
	a.mu.Lock()
	a.report = report
	a.mu.Unlock()
}

// WriteErrors returns how many writes to the output failed; Dropped how
// many lines were dropped because the buffer was full of lines waiting for
// a failing output.
func (a *Log) WriteErrors() int64 { return a.errs.Load() }
func (a *Log) Dropped() int64     { return a.dropped.Load() }
