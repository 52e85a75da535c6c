// Package certshare shares one edge certificate directory
// (<state>/edge/certs, edgeproxy/certstore) over HTTP, so the edge tasks of
// a swarm (one per node, each with its own tmpfs state) act as one
// certmagic cluster: one order per name (a lease lock), the ACME HTTP-01
// challenge answered by whichever edge the CA reaches (certmagic stores
// each challenge's key authorization in the shared storage, and every
// edge's challenge handler looks it up there), and the operator's static
// certificates mirrored to every edge.
//
// Server serves one certs root to requests carrying "Authorization:
// Bearer <token>" (compared in constant time; anything else is 401 and
// changes nothing). Every path is under /v1/; a key or prefix is the
// query parameter key (a slash-separated relative path: "..", ".",
// empty elements, a leading slash or a backslash are 400):
//   - GET /v1/acme?key=K (200, the value; 404), PUT /v1/acme?key=K (the
//     body, at most MaxValueBytes, else 413; 204), DELETE /v1/acme?key=K
//     (204, also when absent): certmagic's Load, Store, Delete on the
//     acme/ subtree, with certmagic.FileStorage's semantics (0700
//     directories, 0600 files written atomically);
//   - GET /v1/stat?key=K: Stat as JSON {key, modified, size, terminal}
//     (404 when absent; Exists is a Stat that succeeds);
//   - GET /v1/list?key=P&recursive=1: List as a JSON array of keys (404
//     when P does not exist);
//   - POST /v1/lock?name=N: waits (at most Server.MaxWait, and never past
//     the request's context) until lock N is free, then answers 200
//     {"lease": ID, "ttl_ms": T}; 409 when it is still held after the
//     wait (the client asks again). A lease not renewed within T
//     (Server.LeaseTTL, default 30 s) is released: a client that died
//     mid-order does not keep the name locked;
//   - POST /v1/renew?name=N&lease=ID, POST /v1/unlock?name=N&lease=ID:
//     204; 409 when ID does not hold N (expired, or taken over since);
//   - GET /v1/static: the static/ store as JSON [{name, files: {file:
//     sha256 hex}}] (cert.pem and key.pem of each static/<name>/), and
//     GET /v1/static/file?name=N&file=F its content (404 when absent).
//
// Client is the other side: certmagic.Storage's methods over a Server
// (Stat returning KeyInfo: the edge adapts it to certmagic.Storage), plus
// SyncStatic, which mirrors the server's static/ into a local certs root
// so certstore.LoadStatic reads it unchanged. The package imports the
// standard library only: the Server runs in the CLI (docker gordon
// reconcile), which must not link certmagic (test/arch startup).
package certshare
