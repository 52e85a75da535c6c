// Package routetable holds the only types the engine and the edge proxy
// share: the route table (edge/routes.json) and the edge status
// (edge/status.json), ARCHITECTURE §5. The files' names and how they are
// written are in edgeproxy/edgestate. It imports nothing of the project.
package routetable

import "time"

// Schema is the route table schema version this build reads and writes.
const Schema = 1

// Graph is the whole route graph computed from every app's ACTIVE record
// (SPEC decision 11). Lists are sorted (HTTP by host, TCP/UDP by listen).
type Graph struct {
	HTTP []HTTPRoute `json:"http"`
	TCP  []L4Route   `json:"tcp"`
	UDP  []L4Route   `json:"udp"`
}

// MaxGenerationStep is how far above its applied generation (0 before
// any) an edge takes a pushed or peer table: a generation more than 2^32
// above is refused, since no publisher gets there one deploy at a time
// and a table pushed at 2^64-1 would otherwise hold every later one off.
const MaxGenerationStep uint64 = 1 << 32

// FarAhead reports whether gen is more than MaxGenerationStep above base.
func FarAhead(gen, base uint64) bool {
	return gen > base && gen-base > MaxGenerationStep
}

// Table is edge/routes.json: a Graph stamped with a generation.
type Table struct {
	Schema     int    `json:"schema"`
	Generation uint64 `json:"generation"`
	Graph
}

// HTTPRoute routes requests for Host ("example.com" or "*.example.com") to
// Backends: every instance of the serving generation (ActiveService
// Instances), requests spread over them.
type HTTPRoute struct {
	Host     string    `json:"host"`
	App      string    `json:"app"`
	Service  string    `json:"service"`
	Backends []Backend `json:"backends"`
	// DialTimeoutMS bounds dialing a backend of this route, in
	// milliseconds (optional; 0 takes the edge default, 5 s). A dial
	// timeout answers 504.
	DialTimeoutMS int64 `json:"dial_timeout_ms,omitempty"`
	// ResponseHeaderTimeoutMS bounds the wait for a backend's response
	// headers once the request was sent, in milliseconds (optional; 0:
	// unbounded). Exceeding it answers 504.
	ResponseHeaderTimeoutMS int64 `json:"response_header_timeout_ms,omitempty"`
	// Hold, when set, says the service is between generations (SPEC R58):
	// Backends is empty and the edge holds each request for Host until a
	// table routes it again (then it goes there), the hold ends (503 with
	// Retry-After) or Hold.Until passes (503).
	Hold *Hold `json:"hold,omitempty"`
	// Stopped says the service is stopped (SPEC R58): Backends is empty and
	// the edge answers 503 with Retry-After.
	Stopped bool    `json:"stopped,omitempty"`
	Asleep  *Asleep `json:"asleep,omitempty"` // SPEC R81: no backends; requests wake it
	// Unavailable says the app runs but no instance of the service is
	// ready (withdrawn by recovery, SPEC R41: crashed, unhealthy,
	// restarting): Backends is empty and the edge answers 503 with
	// Retry-After, never 404 (which says the host is unknown).
	Unavailable bool `json:"unavailable,omitempty"`
	// TLS is the host's HTTPS policy (SPEC R62): "" (same as "auto"),
	// "auto", "always" or "never".
	TLS string `json:"tls,omitempty"`
	// Protocol is the backend protocol: "" or "http1" (HTTP/1.1), "h2c"
	// (cleartext HTTP/2).
	Protocol string `json:"protocol,omitempty"`
	// HSTS is the Strict-Transport-Security value the edge sends on this
	// host's HTTPS answers, in place of the backend's (RFC 6797; "":
	// none), e.g. "max-age=31536000; includeSubDomains".
	HSTS string `json:"hsts,omitempty"`
	// BasicAuth, when set, are htpasswd bcrypt lines "user:$2y$..."
	// (ParseBasicAuth): a request without the credentials of one of them
	// gets 401 with WWW-Authenticate. The edge removes the Authorization
	// header of a request it lets through.
	BasicAuth []string `json:"basic_auth,omitempty"`
	// Allow, when set, are CIDRs or IPs (ParseAllow): a request whose
	// client address (the peer, or the address a trusted proxy forwarded)
	// is in none of them gets 403. It is checked before BasicAuth.
	Allow       []string     `json:"allow,omitempty"`
	Maintenance *Maintenance `json:"maintenance,omitempty"` // SPEC R75, checked before Allow
}

type Maintenance struct { // SPEC R75: 503 with Message ("": a default) to clients outside Allow
	Message string   `json:"message,omitempty"`
	Allow   []string `json:"allow,omitempty"`
}

// Hold bounds how long the edge holds requests and connections for a
// service between generations (SPEC R58).
type Hold struct {
	// Until is the latest moment a held request waits (UTC); after it the
	// route answers 503 at once.
	Until time.Time `json:"until"`
	// Queue is the most requests (HTTP) or connections (TCP) held at once
	// for the route (0: 1024); beyond it the edge answers 503 (closes).
	Queue int `json:"queue,omitempty"`
}

// Asleep is a sleeping service's route (SPEC R81): requests and connections are held WakeTimeoutMS (0: 60 s), but Ignore paths (exact, or prefix*) do not wake it.
type Asleep struct {
	WakeTimeoutMS int64    `json:"wake_timeout_ms,omitempty"`
	Ignore        []string `json:"ignore,omitempty"`
}

// DefaultHoldQueue is the hold queue bound when Hold.Queue is 0.
const DefaultHoldQueue = 1024

// Holding reports whether h holds at t (set and Until not passed).
func (h *Hold) Holding(t time.Time) bool { return h != nil && t.Before(h.Until) }

// L4Backends returns the route's instances: Backends when set, else the
// single Backend with Container (none while held).
func (r L4Route) L4Backends() []Backend {
	if len(r.Backends) > 0 {
		return r.Backends
	}
	if r.Backend == "" {
		return nil
	}
	return []Backend{{Addr: r.Backend, Container: r.Container}}
}

// Backend is one upstream: an instance's address and the container behind
// it (SPEC R18).
type Backend struct {
	// Addr is "<container IP>:<port>" on the app's network, or
	// "127.0.0.1:<host port>" where the runtime falls back to loopback.
	Addr      string `json:"addr"`
	Container string `json:"container"`
}

// L4Route relays connections (TCP) or datagrams (UDP) arriving on Listen
// ("IP:port") to Backend (an instance's address, as Backend.Addr).
type L4Route struct {
	Listen    string `json:"listen"`
	App       string `json:"app"`
	Service   string `json:"service"`
	Backend   string `json:"backend"`
	Container string `json:"container,omitempty"`
	// Backends, when the service runs more than one instance, lists every
	// instance (the first is Backend and Container): a TCP relay spreads
	// new connections over them; a UDP route has one instance.
	Backends []Backend `json:"backends,omitempty"`
	// Hold, when set, says the service is between generations (TCP only,
	// SPEC R58): Backend is empty, the listener stays bound and new
	// connections are accepted and held until a table gives the listen a
	// backend (then they are spliced to it), the hold ends or Hold.Until
	// passes (then they are closed).
	Hold   *Hold   `json:"hold,omitempty"`
	Asleep *Asleep `json:"asleep,omitempty"` // SPEC R81 (TCP): no backend; connections wake it
	// IdleTimeoutMS closes a relayed connection (UDP: ends a session)
	// silent both ways this long; MaxConns bounds the route's connections
	// (UDP: sessions) at once. 0: the edge's defaults (TCP 50 s and 2000,
	// UDP 30 s and 4096).
	IdleTimeoutMS int64 `json:"idle_timeout_ms,omitempty"`
	MaxConns      int   `json:"max_conns,omitempty"`
}

// Status is edge/status.json, written by the edge after each apply attempt.
type Status struct {
	AppliedGeneration uint64    `json:"applied_generation"`
	PID               int       `json:"pid"`
	StartedAt         time.Time `json:"started_at"`
	UpdatedAt         time.Time `json:"updated_at"`
	// Error is the last rejected table's error ("" when the last read applied).
	Error string `json:"error,omitempty"`
	// RejectedGeneration is the generation of the table Error is about (0
	// when Error is empty or the rejected file had no readable generation).
	RejectedGeneration uint64 `json:"rejected_generation,omitempty"`
	// AdminAddr is where live per-backend counts are served (GET /status).
	AdminAddr string           `json:"admin_addr,omitempty"`
	Listeners []ListenerStatus `json:"listeners,omitempty"`
	Backends  []BackendStatus  `json:"backends,omitempty"`
	// StateID is StateDirID of the state directory this edge serves: a
	// publisher working on another directory (a copy) must not take this
	// edge's answers as confirmation of its tables.
	StateID string `json:"state_id,omitempty"`
	// AccessLog is where the edge writes its access log: "stdout", a file
	// path, or "" (none).
	AccessLog string `json:"access_log,omitempty"`
}

// ListenerStatus reports one listener (HTTP, TCP or UDP).
type ListenerStatus struct {
	Addr  string `json:"addr"`
	Proto string `json:"proto,omitempty"`
	Error string `json:"error,omitempty"`
}

// BackendStatus reports live counts for one backend address.
type BackendStatus struct {
	Addr      string `json:"addr"`
	InFlight  int64  `json:"in_flight"`
	OpenConns int64  `json:"open_conns"`
	// EjectedUntil is the end of the backend's current passive-health
	// ejection (zero: admitted; SPEC R21), EjectReason why it was
	// ejected ("connect failed", "reset before response", "response
	// header timeout").
	EjectedUntil time.Time `json:"ejected_until,omitzero"`
	EjectReason  string    `json:"eject_reason,omitempty"`
	// Requests and Errors (5xx, proxy errors too) are cumulative (R76).
	Requests int64 `json:"requests,omitempty"`
	Errors   int64 `json:"errors,omitempty"`
}
