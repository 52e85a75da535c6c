// Package control holds the credentials of a swarm's control channel
// (docs/security.md, "The control channel on a swarm"): who may push
// route tables to an edge, who may read route tables and the certificate
// storage, and the TLS material that encrypts the channel with a CA the
// manager made and both ends pin.
//
// Two capabilities, two tokens:
//   - the push token, held by the manager only (its state directory): it
//     opens PUT /routes, PUT /control and the admin endpoints of every
//     edge. An edge holds only its SHA-256 (PushSHA256), so an edge, or
//     root on an edge's node, cannot push to the other edges;
//   - the edge token, held by every edge: it opens GET /routes on the
//     peers and the certificate storage (which holds the TLS keys: every
//     edge serves them).
//
// An edge starts from the Credentials in its Docker secret (a file, never
// the environment) and takes newer ones pushed by the manager (PUT
// /control, authorized by a push token it accepts): that is how `docker
// gordon system rotate-token` changes the tokens of running edges without
// replacing a task.
//
// It serves PUT /control on a swarm edge's admin address (Keyring.ServeUpdate)
// and links only the standard library.
package control
