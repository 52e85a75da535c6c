// Package policy is the edge's per-request policy, the same on every path
// (the event loop, the HTTP/1.1 loop, the HTTP/2 fast path and ServeHTTP):
// who the client is, whether a route lets it through, and what the
// backend is told about it.
//
// It serves every HTTP request of a route with access rules (SPEC R73,
// Guard: allow list 403, basic auth 401, password checks bounded by
// Verifier, 429 when none is free) or in maintenance (SPEC R75,
// Maintenance: 503 with an HTML page or a JSON document by Accept, the
// maintenance allow list exempted), and the route table's validation of
// both (ValidateAccess, ValidateMaintenance) (access.go, maintenance.go).
// Of every proxied request it computes the forwarded headers and the
// request id (STYLE "What we take" 13: X-Forwarded-For, -Proto, -Host,
// Forwarded, X-Request-Id; a trusted proxy's chain extended, anyone
// else's replaced) (forwarded.go).
//
// The client address is the peer's, or behind the trusted proxies
// (ParseTrustedProxies) the right-most X-Forwarded-For hop that is not
// one. The edge (package edgeproxy) builds a Guard and a Maintenance per
// route in each snapshot, asks Check and Exempts, and writes the refusal
// pages and the access log itself (policy.go there). This package
// imports nothing of the edge but h1wire (the client-claim header names);
// the entries' syntax is core/access's, the route records
// core/routetable's.
package policy
