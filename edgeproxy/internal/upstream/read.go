package upstream

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// Tick is how long an exchange waits on a backend before it checks that
// the client is still connected (net/http notices at once through a
// background read per request; this costs nothing per request).
const Tick = time.Second

// ErrClientGone ends an exchange whose client closed its connection (or
// reset its stream): Watch.Wait returns it.
var ErrClientGone = errors.New("client closed the connection")

// Watch bounds the reads of one backend exchange (the h1 loop's and the
// HTTP/2 fast path's): the route's response header deadline, and a client
// check every Tick. Gone reports a client that left; it is set once (per
// connection or stream) and called from Wait.
type Watch struct {
	up         *Conn
	rhDeadline time.Time
	Gone       func() bool // the client left (called by Wait only)
}

// Arm sets fc's read deadline for an exchange: the route's response
// header deadline (responseHeader from now; 0: none) or the next client
// check, whichever is first. For a timeout over 2 s the deadline is moved
// only when it is near, so most requests do not touch it.
func (w *Watch) Arm(fc *Conn, responseHeader time.Duration) {
	w.up = fc
	now := time.Now()
	w.rhDeadline = time.Time{}
	if responseHeader > 0 {
		w.rhDeadline = now.Add(responseHeader)
		if responseHeader <= 2*Tick {
			// Short: its own deadline. A longer one (the 60 s default) is
			// checked at the client checks, at most Tick late, so
			// it costs no deadline update per request either.
			fc.setWatch(earliest(now.Add(Tick), w.rhDeadline))
			return
		}
	}
	if fc.watchUntil.Sub(now) < Tick/2 {
		fc.setWatch(now.Add(Tick))
	}
}

// HeadDone lifts the route's response header deadline once the head came
// (a deadline armed for it only makes Wait check the client and re-arm
// the next check).
func (w *Watch) HeadDone() {
	w.rhDeadline = time.Time{}
}

// Wait judges an error from reading the backend: a deadline that is only
// a client check returns nil (read on) while the client is still there,
// ErrClientGone when it is not; the route's response header deadline
// returns ErrResponseHeaderTimeout (504); any other error is returned as
// is.
func (w *Watch) Wait(err error) error {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return err
	}
	now := time.Now()
	if !w.rhDeadline.IsZero() && !now.Before(w.rhDeadline) {
		return ErrResponseHeaderTimeout
	}
	if w.Gone() {
		return ErrClientGone
	}
	next := now.Add(Tick)
	if !w.rhDeadline.IsZero() {
		next = earliest(next, w.rhDeadline)
	}
	w.up.setWatch(next)
	return nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// ReadResponse reads the final response head from fc into buf (reused;
// 1xx informational responses are skipped, their heads counting toward
// MaxResponseHead: h1wire.ErrBadResponse beyond) and works out its body
// framing (RFC 9112 §6.3) into resp; headReq says the request was a HEAD.
// Read errors go through wait (Watch.Wait), and its error is returned;
// resp.Started is set once a byte of the answer came.
func ReadResponse(fc *Conn, resp *h1wire.Response, headReq bool, buf []byte, wait func(error) error) error {
	informational := 0 // bytes of 1xx heads: they count toward MaxResponseHead
	for {
		if _, err := fc.R.Peek(1); err != nil {
			if err = wait(err); err != nil {
				return err
			}
			continue
		}
		resp.Started = true
		head, err := h1wire.ReadHead(fc.R, buf[:0], MaxResponseHead-informational, wait)
		resp.Head = head
		if err != nil {
			if errors.Is(err, h1wire.ErrHeadTooLarge) {
				return h1wire.ErrBadResponse
			}
			return err
		}
		if err := h1wire.ParseResponse(head, resp, headReq); err != nil {
			return err
		}
		if resp.Code == http.StatusSwitchingProtocols {
			return errors.New("backend switched protocols without an upgrade request")
		}
		if resp.Code >= 200 {
			return nil
		}
		informational += len(head)
		buf = head // 1xx: the final response follows
	}
}

// ReadChunkSize reads a chunk-size line from fc (extensions kept in line,
// valid until the next read) and parses its size n in bytes; ok is false
// for a malformed line or a failed read (errors go through wait, as
// ReadLine's).
func ReadChunkSize(fc *Conn, wait func(error) error) (line []byte, n int64, ok bool) {
	line, err := ReadLine(fc, wait)
	if err != nil {
		return nil, 0, false
	}
	size := line
	if i := bytes.IndexByte(size, ';'); i >= 0 {
		size = size[:i]
	}
	n, ok = h1wire.ParseChunkSize(bytes.TrimRight(size, " \t"))
	if !ok || !h1wire.ValidFieldValue(line) {
		return nil, 0, false
	}
	return line, n, true
}

// ReadLine reads one line of a chunked body from fc (CRLF or LF stripped;
// at most the reader's 4 KiB, else h1wire.ErrBadResponse), waiting
// through wait (Watch.Wait) without losing a partial line; wait's error is
// returned. The line is valid until the next read.
func ReadLine(fc *Conn, wait func(error) error) ([]byte, error) {
	for {
		buf, _ := fc.R.Peek(fc.R.Buffered())
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			_, _ = fc.R.Discard(i + 1)
			line := buf[:i]
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line = line[:len(line)-1]
			}
			return line, nil
		}
		if len(buf) == fc.R.Size() {
			return nil, h1wire.ErrBadResponse
		}
		if _, err := fc.R.Peek(len(buf) + 1); err != nil {
			if err = wait(err); err != nil {
				return nil, err
			}
		}
	}
}
