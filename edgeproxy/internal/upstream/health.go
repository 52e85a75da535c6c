package upstream

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"
)

// Passive health (SPEC R21): the edge ejects an instance
// for a bounded time when an exchange with it fails before any response
// byte (a connect failure, a reset or close before the answer, a response
// header timeout), as nginx's max_fails=1 fail_timeout. The first ejection
// lasts Health.Base; each further one within Health.Max of the end of the
// previous doubles it, up to Max. The edge never ejects an instance that
// is the last one of its route not ejected; a route whose instances are
// all ejected (a race) still routes round-robin over them.
const (
	DefaultEjectBase = 10 * time.Second // Health.Base unless configured
	DefaultEjectMax  = 80 * time.Second // Health.Max unless configured
)

// Ejection reasons (edge status, metrics label), as EjectReason returns
// them.
const (
	EjectConnect       = "connect failed"
	EjectReset         = "reset before response"
	EjectHeaderTimeout = "response header timeout"
)

// Health is one backend's passive health state. The request path reads
// only until (one atomic load, Ejected); the rest is written on a failure.
// Base and Max bound its ejections (set at creation, not changed after).
type Health struct {
	// until is the end of the current ejection (unix nanos); 0 when the
	// backend is admitted. An expired value is cleared by the next pick.
	until atomic.Int64
	// lastEnd is the end of the last ejection (unix nanos), streak the
	// number of ejections in a row (each within Max of the previous).
	lastEnd atomic.Int64
	streak  atomic.Int64
	reason  atomic.Pointer[string]

	Base, Max time.Duration
}

// Ejected reports whether the backend is ejected at now (unix nanos); an
// expired ejection is cleared (the backend is readmitted).
func (h *Health) Ejected(now int64) bool {
	u := h.until.Load()
	if u == 0 {
		return false
	}
	if u > now {
		return true
	}
	h.until.CompareAndSwap(u, 0)
	return false
}

// Until is the end of the current or last ejection (unix nanos), 0 when
// none is recorded (never ejected, or readmitted by Ejected).
func (h *Health) Until() int64 { return h.until.Load() }

// Reason is the reason of the last ejection ("" when none).
func (h *Health) Reason() string {
	if p := h.reason.Load(); p != nil {
		return *p
	}
	return ""
}

// Eject ejects the backend from now (unix nanos) for its next bound
// (Base, doubled per ejection in a row, at most Max) and returns the
// ejection's end (unix nanos).
func (h *Health) Eject(now int64, reason string) int64 {
	streak := h.streak.Load()
	if end := h.lastEnd.Load(); end == 0 || now-end > int64(h.Max) {
		streak = 0
	}
	d := h.Base << uint(min(streak, 16))
	if d > h.Max || d <= 0 {
		d = h.Max
	}
	until := now + int64(d)
	h.streak.Store(streak + 1)
	h.lastEnd.Store(until)
	h.reason.Store(&reason)
	h.until.Store(until)
	return until
}

// EjectReason classifies a failed exchange for passive health: the reason
// when it ejects the backend (the backend could not be reached, closed or
// reset the connection before any response byte, or sent no response head
// in time), "" when it does not (the client went away, a malformed
// answer). dial says the exchange failed connecting.
func EjectReason(err error, dial bool) string {
	if err == nil || errors.Is(err, ErrClientGone) {
		return ""
	}
	if errors.Is(err, ErrResponseHeaderTimeout) {
		return EjectHeaderTimeout
	}
	var oe *net.OpError
	if dial || errors.As(err, &oe) && oe.Op == "dial" {
		return EjectConnect
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return EjectHeaderTimeout
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, ErrNotSent) {
		return EjectReset
	}
	return ""
}

// Retryable reports whether a request may be sent again to another
// instance after a failure before any response byte: GET, HEAD and
// OPTIONS always; any other method only when no body byte was sent
// (bodySent false).
func Retryable(method string, bodySent bool) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	return !bodySent
}

// ErrNotSent is an event loop's failed request write (the edge's
// evloop_upstream_linux.go): EjectReason reads it as a reset.
var ErrNotSent = errors.New("backend connection: request not written whole")
