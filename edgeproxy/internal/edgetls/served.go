package edgetls

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"strings"
)

// Served is the set of names with a certificate being served (exact names
// and "*.suffix" patterns). Each refresh that stores a new set stores a
// new *Served, so the pointer also tells a caller that caches a decision
// per set (the HTTP/2 server's per-connection route) whether the set
// changed.
type Served struct{ names map[string]struct{} }

// Served returns the names being served, as of the last refresh.
func (c *Certs) Served() *Served { return c.served.Load() }

// Has reports whether a certificate for the normalized name is being
// served: its own, or its parent's wildcard.
func (s *Served) Has(name string) bool {
	if _, ok := s.names[name]; ok {
		return true
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		_, ok := s.names["*"+name[i:]]
		return ok
	}
	return false
}

// HasHost is Has for a raw Host value of a request (a port is ignored)
// without allocating; a host in an unusual spelling (upper case, a
// trailing dot, empty) reports false, and the caller normalizes it the
// slow way.
func (s *Served) HasHost(host []byte) bool {
	h := host
	if i := bytes.LastIndexByte(h, ':'); i >= 0 && h[0] != '[' {
		h = h[:i]
	}
	if len(h) == 0 || h[len(h)-1] == '.' || !isLower(h) {
		return false
	}
	if _, ok := s.names[string(h)]; ok {
		return true
	}
	if i := bytes.IndexByte(h, '.'); i > 0 {
		var buf [256]byte
		if len(h)-i+1 <= len(buf) {
			w := append(append(buf[:0], '*'), h[i:]...)
			_, ok := s.names[string(w)]
			return ok
		}
	}
	return false
}

// only returns the one name served, when exactly one is.
func (s *Served) only() (string, bool) {
	if len(s.names) != 1 {
		return "", false
	}
	for n := range s.names {
		return n, true
	}
	return "", false
}

// HandshakeFailed counts a failed handshake (result "error") and logs it
// at debug level; a client that spoke plain HTTP to the HTTPS port gets
// net/http's 400 on the raw connection.
func (c *Certs) HandshakeFailed(tc *tls.Conn, err error) {
	c.handshakes.WithLabelValues("error").Inc()
	reason := err.Error()
	var re tls.RecordHeaderError
	if errors.As(err, &re) && re.Conn != nil && recordLooksLikeHTTP(re.RecordHeader) {
		_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		reason = "client sent an HTTP request to an HTTPS server"
	}
	c.logger.Debug("TLS handshake error", "remote", tc.RemoteAddr().String(), "error", reason)
}

// recordLooksLikeHTTP reports whether a TLS record header is the start of
// a plain HTTP request (as net/http judges it).
func recordLooksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// hostName normalizes a server name or a configured host as the edge's
// routing does (edgeproxy's normalizeHost): without a port or a trailing
// dot, lower case.
func hostName(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			host = host[1:i]
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.IndexByte(host, ':') == i {
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	if !isLower(host) {
		host = strings.ToLower(host)
	}
	return host
}

func isLower[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}
