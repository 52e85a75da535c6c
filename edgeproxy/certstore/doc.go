// Package certstore is the on-disk certificate store the edge and the
// traffic/edge backend share (SPEC R63): <state>/edge/certs/ (0700) holds
//
//	static/<name>/cert.pem, key.pem   operator certificates (certs add), 0600
//	acme/                             certmagic's file storage (ACME account,
//	                                  obtained certificates and keys, 0600)
//	state.json                        the edge's view of every host's
//	                                  certificate (certs ls, status)
//
// <name> is the host with a leading "*" written as "wildcard_"
// ("*.example.com" → "wildcard_.example.com"). Every file is written
// atomically (temp file, fsync, rename). It imports only the standard
// library and edgeproxy/edgestate. It serves no request: the edge's
// certificates (edgeproxy/internal/edgetls) read it, the traffic/edge
// backend writes operator certificates into it.
package certstore
