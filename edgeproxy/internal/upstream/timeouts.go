package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"syscall"
	"time"
)

// Timeouts are a route's optional upstream timeouts: Dial bounds the
// connect to a backend, ResponseHeader the wait for its response head
// from the request sent whole. 0 is the default (the edge-wide dial
// timeout; no response header timeout).
type Timeouts struct {
	Dial, ResponseHeader time.Duration
}

// dialTimeoutKey carries a route's dial timeout to the fallback transport.
type dialTimeoutKey struct{}

// WithTimeouts returns the http.RoundTripper of a route with timeouts tm
// over t's connection pool: t itself when tm is zero. Its errors are t's,
// and ErrResponseHeaderTimeout when the response head came too late.
func (t *Transport) WithTimeouts(tm Timeouts) http.RoundTripper {
	if tm == (Timeouts{}) {
		return t
	}
	return &timedTransport{ft: t, tm: tm}
}

// timedTransport applies a route's own timeouts over a backend's pool.
type timedTransport struct {
	ft *Transport
	tm Timeouts
}

// ErrResponseHeaderTimeout is returned when a backend sent no response
// headers within the route's response header timeout (a net.Error whose
// Timeout is true: 504).
var ErrResponseHeaderTimeout error = &timeoutError{"backend sent no response headers in time"}

type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

func (t *timedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if eligible(req) {
		return t.ft.roundTrip(req, t.tm)
	}
	ctx := req.Context()
	if t.tm.Dial > 0 {
		ctx = context.WithValue(ctx, dialTimeoutKey{}, t.tm.Dial)
	}
	if t.tm.ResponseHeader <= 0 {
		return t.ft.fallback.RoundTrip(req.WithContext(ctx))
	}
	// The context must outlive RoundTrip (the body reads under it), so it
	// is canceled only by the timer; it ends with the request's context.
	// The clock starts once the request is sent whole: at the end of its
	// body (an upload of any length is not cut), at once without one.
	ctx, cancel := context.WithCancelCause(ctx)
	hw := &headerWatch{d: t.tm.ResponseHeader, fire: func() { cancel(ErrResponseHeaderTimeout) }}
	out := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		out.Body = &sentNotifier{ReadCloser: req.Body, hw: hw}
	} else {
		hw.start()
	}
	resp, err := t.ft.fallback.RoundTrip(out)
	if hw.stop() && err != nil && errors.Is(context.Cause(ctx), ErrResponseHeaderTimeout) {
		return nil, ErrResponseHeaderTimeout
	}
	return resp, err
}

// headerWatch is a response header timer started once the request is sent.
type headerWatch struct {
	d    time.Duration
	fire func()

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func (w *headerWatch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer == nil && !w.stopped {
		w.timer = time.AfterFunc(w.d, w.fire)
	}
}

// stop stops the timer and reports whether it had fired.
func (w *headerWatch) stop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	return w.timer != nil && !w.timer.Stop()
}

// sentNotifier starts hw when the request body ends (EOF or closed).
type sentNotifier struct {
	io.ReadCloser
	hw *headerWatch
}

func (n *sentNotifier) Read(p []byte) (int, error) {
	m, err := n.ReadCloser.Read(p)
	if err != nil {
		n.hw.start()
	}
	return m, err
}

func (n *sentNotifier) Close() error {
	n.hw.start()
	return n.ReadCloser.Close()
}

// Classify maps a failed exchange's error to a status code and what
// happened, for the error page: 504 when the backend timed out, 503 when
// it refused or reset the connection (no container listening), 502
// otherwise; 0 and "" when the client canceled (ctx is the request's).
func Classify(ctx context.Context, err error) (code int, what string) {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return 0, ""
	}
	if errors.Is(err, ErrResponseHeaderTimeout) {
		return http.StatusGatewayTimeout, "the backend sent no response headers within the response timeout (response_timeout)"
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return http.StatusGatewayTimeout, "backend timed out"
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return http.StatusServiceUnavailable, "backend unavailable"
	}
	return http.StatusBadGateway, "bad gateway"
}

// BufferPool is a sync.Pool of 32 KiB copy buffers shared by all proxies
// (an httputil.BufferPool). It pools array pointers, so Put converts the
// slice back without allocating.
type BufferPool struct{ p sync.Pool }

const copyBufferSize = 32 * 1024

// NewBufferPool returns an empty pool of 32 KiB buffers.
func NewBufferPool() *BufferPool {
	return &BufferPool{p: sync.Pool{New: func() any { return new([copyBufferSize]byte) }}}
}

// Get returns a 32 KiB buffer.
func (p *BufferPool) Get() []byte { return p.p.Get().(*[copyBufferSize]byte)[:] }

// Put returns b to the pool when it has at least 32 KiB of capacity (it
// is dropped otherwise).
func (p *BufferPool) Put(b []byte) {
	if cap(b) >= copyBufferSize {
		p.p.Put((*[copyBufferSize]byte)(b[:copyBufferSize]))
	}
}

// errTooMuchInformational fails a response whose informational (1xx)
// answers, forwarded to the client as they come, pass MaxResponseHead in
// all (502).
var errTooMuchInformational = errors.New("backend sent more than 1 MiB of informational (1xx) responses")

// InformationalBudget returns the client trace that bounds the 1xx answers
// of one request: net/http's transport lifts its response head limit for
// each 1xx the reverse proxy forwards, so a backend could stream them to
// the client without end. Their heads count toward MaxResponseHead, as
// on the event loop; past it the request fails with an error (502).
func InformationalBudget() *httptrace.ClientTrace {
	left := MaxResponseHead
	return &httptrace.ClientTrace{
		Got1xxResponse: func(code int, header textproto.MIMEHeader) error {
			left -= len("HTTP/1.1 100 \r\n\r\n") + len(http.StatusText(code))
			for k, vs := range header {
				for _, v := range vs {
					left -= len(k) + len(v) + 4
				}
			}
			if left < 0 {
				return errTooMuchInformational
			}
			return nil
		},
	}
}
