package h1wire

import (
	"bytes"
	"errors"
)

// underscoreAlias reports whether name contains an underscore and, with
// underscores read as hyphens, names a header the edge treats specially
// (framing, hop-by-hop, forwarding, client claims, Host): a backend that
// maps '-' and '_' alike (CGI, WSGI, PHP, some frameworks) would read it
// as that header, so such names are dropped before the request is
// forwarded (nginx drops every name with an underscore by default).
func UnderscoreAlias(name []byte) bool {
	if len(name) > 19 || bytes.IndexByte(name, '_') < 0 {
		return false
	}
	var buf [19]byte
	b := buf[:len(name)]
	for i, c := range name {
		if c == '_' {
			c = '-'
		}
		b[i] = c
	}
	return HeaderKind(b) != HdrOther
}

// connSetMin is how many Connection-named headers make namedSet build a
// set (fewer: a linear scan, no allocation).
const connSetMin = 16

// namedSet is the set of header names a Connection header lists, for a
// linear-time check of every header against it (lowercase keys).
type namedSet map[string]struct{}

func newNamedSet(names [][]byte) namedSet {
	if len(names) < connSetMin {
		return nil
	}
	m := make(namedSet, len(names))
	for _, n := range names {
		m[string(bytes.ToLower(n))] = struct{}{}
	}
	return m
}

// has reports whether name (any case) is in the set.
func (m namedSet) has(name []byte) bool {
	var buf [64]byte
	b := buf[:0]
	for _, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	_, ok := m[string(b)]
	return ok
}

// namedBy reports whether name is among names (set: their namedSet, nil
// when there are few).
func namedBy(names [][]byte, set namedSet, name []byte) bool {
	if set != nil {
		return set.has(name)
	}
	for _, n := range names {
		if bytes.EqualFold(n, name) {
			return true
		}
	}
	return false
}

func (r *Request) NamedByConnection(name []byte) bool {
	return namedBy(r.ConnNames, r.connSet, name)
}

var (
	ErrHeadTooLarge = errors.New("head too large")
	ErrBadResponse  = errors.New("malformed backend response")
)

// requestIDBuf holds an X-Request-Id the edge generated (n bytes of b; 0:
// none), or, on the HTTP/2 fast path, the one the client sent (given).
type RequestIDBuf struct {
	B     [32]byte
	N     uint8
	Given string
}

// acmeChallengePrefix is the HTTP-01 path, answered before host routing
// and never redirected.
const ACMEChallengePrefix = "/.well-known/acme-challenge/"

var acmeChallengePath = []byte(ACMEChallengePrefix)
