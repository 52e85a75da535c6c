package l4

import "github.com/hashicorp/go-hclog"

// Backend is one upstream address as the relays see it: the edge's
// backend, whose counters the drain reads (SPEC decision 16) and whose
// passive health says whether it takes new connections (R21).
type Backend interface {
	// Addr is the address dialed ("host:port").
	Addr() string
	// Ejected reports whether passive health has the backend ejected at
	// now (unix nanos); an expired ejection is cleared.
	Ejected(now int64) bool
	// AddOpen moves the count of relayed connections and UDP sessions
	// open on the backend.
	AddOpen(delta int64)
	// AddInFlight moves the count of what is in flight on it: a relayed
	// TCP connection counts until the backend's first byte (at most
	// tcpAnswerWait).
	AddInFlight(delta int64)
}

// Backends is the edge's registry of backends, as the relays use it.
type Backends interface {
	// Get returns the backend for addr (one per address, shared with
	// the HTTP routes), marking it referenced.
	Get(addr string) Backend
	// ConnectFailed ejects b, whose connect failed on the listener
	// listen, unless it is ejected already (passive health, R21).
	ConnectFailed(b Backend, listen string)
	// Retried counts a connect retried away from b.
	Retried(b Backend)
}

// orNull is logger, or a logger that drops everything when it is nil.
func orNull(logger hclog.Logger) hclog.Logger {
	if logger == nil {
		return hclog.NewNullLogger()
	}
	return logger
}
