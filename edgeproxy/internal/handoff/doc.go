// Package handoff carries an HTTP/1.1 client connection from the edge's
// own loops (internal/dataplane) to the root's net/http server: the
// requests it serves are the ones the loops do not (a body, an upgrade,
// Expect, HTTP/1.0, an unknown host, a head the loops do not fully
// accept).
//
// ReplayConn replays the bytes the loop already read before the rest of
// the connection; HandoffListener is the net.Listener net/http accepts
// them from. TrackedConn follows the request framing of a handed-off
// connection byte for byte (a framingTracker fed by every Read) so that a
// request net/http parses differently from the framing on the wire is
// refused (request smuggling, RFC 9112 §6.1 and §11.2); BodyGuard bounds a
// request body's idle time and answers a malformed one. It imports nothing
// of the edge but h1wire.
package handoff
