// Package edgetls is the edge's certificates and TLS configuration (SPEC
// R62, R63): the tls.Config of the HTTPS listener (TLS 1.2 and 1.3, AEAD
// suites with forward secrecy, ALPN h2, http/1.1, acme-tls/1) and the
// certificate every HTTPS handshake gets.
//
// It serves the TLS handshake of every HTTPS connection, and no HTTP
// request: a ClientHello's server name (SNI) picks the certificate — a
// TLS-ALPN-01 challenge goes to certmagic; then the static store (certs
// add; exact, then wildcard); then certmagic's cache (exact routed hosts
// managed in the background, names under a routed wildcard ordered on
// demand); a routed host without one yet gets a self-signed fallback (the
// edge then answers 503 with a page); an unrouted host fails the
// handshake. A ClientHello without SNI gets the default certificate
// (Options.DefaultCertHost, else the only one served). Of HTTP requests it
// answers only the ACME HTTP-01 challenges the edge hands it
// (HandleHTTPChallenge).
//
// Both stores are files under <state>/edge/certs (certstore), so a
// restarted edge serves what it has at once and orders nothing it already
// holds. Refresh (after each route table apply, every full re-read and
// after certmagic's events) rebuilds the names served (Served, which the
// edge's loops consult per request), the expiry gauges and
// certs/state.json, and hands new exact hosts to certmagic.
//
// It sees the route table through Table, which the edge's snapshot
// implements, and imports nothing of the edge above it (test/arch holds
// that): the edge accepts, handshakes with TLSConfig and dispatches to
// its HTTP/1.1 loop or HTTP/2 server, and decides redirects and the 503
// page (edgeproxy, tls.go, tls_accept.go).
package edgetls
