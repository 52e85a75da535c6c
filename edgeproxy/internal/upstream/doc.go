// Package upstream is the edge's side of its exchanges with backends (SPEC
// decision 16): it serves the backend half of every proxied HTTP request,
// HTTP/1.1 and HTTP/2, on the edge's own loops and through net/http, and
// no client connection.
//
// Transport (transport.go) is one backend's pool of kept-alive HTTP/1.1
// connections: the loops Get a Conn, write the request, read the answer
// (ReadResponse, ReadChunkSize, ReadLine, read.go) under a Watch (the
// route's response header timeout and a check every Tick that the client
// is still there) and Put it back; net/http's ReverseProxy uses it as its
// http.RoundTripper (bodiless GET and HEAD synchronously on the same
// pool, every other request over a tuned http.Transport), with a route's
// Timeouts (timeouts.go). Classify maps a failed exchange to its
// 502/503/504. Health (health.go) is a backend's passive health: the
// ejections EjectReason decides, bounded and doubling (R21).
//
// The edge (internal/dataplane) keeps the backends' registry, routing,
// retries, the forwarded headers and the relaying to clients; this package
// imports nothing of the edge but h1wire (the response heads it parses).
package upstream
