package h2srv

import (
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
)

// Handler serves a connection's streams: the edge's routing, backends,
// metrics and access log, on its own goroutine per stream.
type Handler interface {
	// ServeFast serves a request that may take the fast path (FastPath's
	// rules: a GET or HEAD without a body, from a peer that is not a
	// trusted proxy), writing its answer with st's Write methods; false,
	// with nothing written, leaves it to ServeHTTP.
	ServeFast(st *Stream, method, path, authority string, fields []hpack.HeaderField) bool
	// ServeHTTP serves every other request.
	http.Handler
}

// Config is a connection's part of the edge.
type Config struct {
	Handler Handler
	Logger  Logger
	// Trusted: the peer is a trusted proxy (its requests never take the
	// fast path, whose forwarded headers are those of an untrusted peer).
	Trusted bool
	// ReadHeaderTimeout bounds the client preface; IdleTimeout ends the
	// connection (GOAWAY) with no stream open that long (0: never).
	ReadHeaderTimeout, IdleTimeout time.Duration
	// WriteTimeout bounds one write of the connection's output.
	WriteTimeout time.Duration
	// StallTimeout bounds how long a stream waits for the client to widen
	// a window it exhausted (the bound of an HTTP/1.1 write the client
	// does not read): past it the stream is reset, so a client that never
	// grants window does not hold a handler and its backend connection
	// forever.
	StallTimeout time.Duration
	// Stalled counts the streams of every connection of the edge waiting
	// for send window (h2MaxStalled).
	Stalled *atomic.Int64
	// ErrorPage writes the edge's page for a request it refuses itself
	// (400, 431) on the ServeHTTP path.
	ErrorPage func(w http.ResponseWriter, code int, body string)
	// Closed is called when the connection's socket is closed; Done once
	// its last handler has returned after that.
	Closed func(*Conn)
	Done   func()
}

// Logger is the edge's log, as the server uses it (key-value pairs after
// the message).
type Logger interface {
	Debug(msg string, args ...any)
	Error(msg string, args ...any)
}
