// Package h2srv is the edge's HTTP/2 server (SPEC R62): it serves every
// request of an HTTPS connection that negotiated h2 (ALPN), from the
// client preface to the connection's close, and no other request.
//
// It reads and writes the frames (x/net/http2's Framer and HPACK), keeps
// the streams' states and both directions' flow control (conn.go,
// stream.go), checks each request's header block (validate.go), enforces
// the abuse bounds (streams, header list and HPACK decoding, stalled
// streams) and drains a connection with two GOAWAYs (Conn.Drain).
//
// The edge (package edgeproxy) supplies a Handler per connection: its fast
// path (ServeFast), which relays a backend's HTTP/1.1 answer through the
// Stream's Write methods (fast.go), and its ServeHTTP for every other
// request, given an http.ResponseWriter that writes frames (response.go).
// The edge keeps routing, backends, metrics, the access log and the
// forwarded headers; this package imports nothing of the edge but h1wire
// (the parsed backend answer the fast path relays).
package h2srv
