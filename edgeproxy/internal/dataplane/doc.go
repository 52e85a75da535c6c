// Package dataplane serves the plain HTTP and HTTPS requests the edge
// proxies itself over HTTP/1.1 (SPEC decision 16, R18, R21): it holds the
// route snapshot they are routed on, the backends they are sent to, their
// metrics and access-log lines, and the connections that carry them.
//
// Core is the per-request state: the current Snapshot (exact hosts by
// map, wildcards and unknown hosts through a bounded ristretto cache,
// Core.Route), the backend Registry (one Backend per upstream address,
// with its keep-alive pool, in-flight and open-connection counters and
// passive health; Eject never takes the last instance), the metrics
// (label children resolved when a snapshot is built) and the ConnServer.
//
// ConnServer accepts the public HTTP connections and registers every
// client connection the edge serves itself: HTTP/1.1 connections, plain
// or TLS (H1Conn), HTTPS connections during their handshake and HTTP/2
// connections (registered by the root, served by internal/h2srv);
// Shutdown drains them together. It serves bodiless GET and HEAD requests
// for a routed host without allocating per request (h1_conn.go,
// h1_exchange.go, h1_response.go), on Linux first on event loops that
// hold no goroutine per connection (evloop_*_linux.go over
// internal/evloop), and retries an idempotent request once on another
// instance (Core.Failover). Every other request is handed, at a request
// boundary and with the bytes read so far, to the root's net/http server
// (internal/handoff), which also uses this package's Registry
// (ReverseProxy per backend, ProxyError) and StatusWriter.
//
// The HTTPS edge is reached through TLSSide (the root's tls.go); the
// package imports nothing of the root.
package dataplane
