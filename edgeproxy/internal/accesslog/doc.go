// Package accesslog writes the edge's access log: one JSON line for every
// HTTP request the edge answers, HTTP/1.1 and HTTP/2, proxied or answered
// by the edge itself (R74). It serves no request: the edge
// (internal/dataplane, accesslog.go) fills an Entry when a request ends and
// hands it to Log.Write, or Log.WriteRequest for a request a net/http
// server answered.
//
// A line is encoded by appending into a pooled buffer (no reflection, no
// allocation), written whole into one 64 KiB buffered writer, flushed
// every 500 ms and on Close (accesslog.go). Open opens the destination of
// gordon-edge --access-log: off, stdout, or a file rotated by size
// (file.go). It imports nothing of the edge.
package accesslog
