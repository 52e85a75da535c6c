// Package edgeproxy is gordon-edge: the edge proxy that routes public HTTP
// traffic by Host and relays TCP and UDP by listen port to whichever backends the
// route table <state>/edge/routes.json names (ARCHITECTURE §5, SPEC
// decisions 11 and 16).
//
// The table is watched by polling: every Config.PollInterval (default
// 150 ms) the file is stat'ed and re-read when its mtime, size or inode
// changed, and re-read unconditionally every 2 s as a fallback
// (fsnotify is not a dependency; a stat per 150 ms is negligible). A table
// is strictly decoded and validated, built into an immutable snapshot and
// swapped in atomically; a bad table leaves the last good snapshot serving
// (also across a restart: the last applied table is kept in
// <state>/edge/applied.json).
// After every apply attempt the edge writes <state>/edge/status.json
// atomically (routetable.Status). Live per-backend counters are served on
// the admin endpoint (GET /status, GET /healthz, GET /metrics in the
// Prometheus text format; POST /reload re-reads the table at once;
// /debug/pprof/ with Config.Pprof).
//
// On a swarm, where the edge cannot read the publisher's state directory,
// Config.RoutesToken adds PUT /routes and GET /routes to the
// admin endpoint (bearer token; a pushed table is written as the edge's
// own routes.json, then read and applied as above before the answer) and
// Config.Peers pulls a newer table from the other edges every
// Config.PeerInterval (routepush.go, internal/routepush). Without the
// token the admin address must be loopback.
//
// The HTTP hot path: the public listener is served by the edge's
// own HTTP/1.1 loop (internal/dataplane), which proxies plain bodiless GET/HEAD requests
// with no allocation per request over a per-backend keep-alive pool
// (internal/upstream) and hands every other connection, at a request boundary,
// to a net/http server running ServeHTTP (ReverseProxy over the same
// pool; bodies and upgrades over http.Transport). Exact hosts are a map lookup,
// wildcard and unknown hosts go through a bounded ristretto cache;
// metrics use label children resolved at snapshot build; nothing is logged
// per request. Requests carry X-Forwarded-For/-Proto/-Host, Forwarded and
// X-Request-ID (internal/policy); per-route dial and response header timeouts
// come from the table (response header timeout default 60 s,
// Config.ResponseTimeout, then 504). The public server has a read header
// timeout and no write timeout. `make bench-edge` compares the edge with
// nginx.
//
// Hostile input (internal/handoff, internal/policy): request heads over 32 KiB get 431; a request
// with both Content-Length and Transfer-Encoding, or with a folded header
// line, gets 400 and its connection closes (RFC 9112 §6.1, §5.2); header
// names spelled with underscores that read as framing, forwarding or
// client headers are dropped; a request body idle for the body timeout
// (default 60 s) gets 408 and a malformed one 400, and the connection
// closes; error pages name the app and service, not the backend address.
// UDP sessions are bounded per listener, per source and by descriptors
// (internal/l4).
//
// HTTPS (tls.go, tls_accept.go; the certificates are internal/edgetls's):
// the edge handshakes itself; a connection
// that negotiated H2 is served by the edge's own HTTP/2 server (internal/h2srv,
// x/net's framer and HPACK; GET/HEAD without a body go straight to a pooled
// backend connection, h2_fast.go), every other one by the HTTP/1.1 loop
// over the *tls.Conn. Only connections the loop hands off reach a net/http
// server; no HTTP/2 connection does.
//
// Packages. This package owns the listeners, the route table's apply and
// watch, the admin endpoint, the net/http server of handed-off
// connections (ServeHTTP), TLS and the HTTP/2 server's wiring and fast
// path, and wires them, the HTTP/1.1 data plane and the TCP and UDP
// relays in Server and Run. Below it:
//   - internal/dataplane serves the HTTP/1.1 requests the edge proxies
//     itself (the connection server, the event loops' HTTP/1.1 serving,
//     the exchange with a pooled backend connection) and holds the route
//     snapshot, the backend registry and its health, and the metrics
//     every server uses;
//   - internal/handoff carries a connection from the loops to net/http
//     (bytes replayed, framing followed against request smuggling, body
//     guards);
//   - internal/h1wire parses HTTP/1.1 heads (requests from clients,
//     responses from backends) without allocating; it serves no request
//     itself and imports nothing of the edge;
//   - edgestate names the files of <state>/edge and writes them atomically;
//   - internal/edgetls picks the certificate of every HTTPS handshake
//     (SNI, the default certificate without it, the static store, ACME
//     through certmagic), builds the tls.Config and refreshes the names
//     served; it serves the handshakes and no HTTP request but ACME's
//     HTTP-01 challenges;
//   - certstore keeps the operator's certificates;
//   - internal/l4 relays TCP connections and UDP datagrams by listen port
//     (relays.go adapts the backend registry to it);
//   - internal/accesslog encodes and writes the access log's lines
//     (accesslog.go fills them);
//   - internal/policy decides each request's per-route policy: access
//     rules (allow, basic auth), maintenance, the client address behind
//     trusted proxies and the forwarded headers (policy.go answers its
//     refusals);
//   - internal/routepush serves PUT and GET /routes (the pushed route
//     table, its token and generation checks) and asks the peers for a
//     newer table; the root writes and applies what it accepts;
//   - internal/evloop is the event loops' machinery (epoll, registration,
//     wake-ups, non-blocking dials, release to Go's poller); the loops'
//     HTTP/1.1 serving is internal/dataplane's evloop_*_linux.go.
//
// No package under edgeproxy may exceed 4,000 non-test lines, and the root
// may not grow past its ceiling (test/arch, TestLayout_EdgeproxyPackages).
package edgeproxy
