// Package badprobes holds deliberately broken probe plugins, one command per
// misbehaviour, built by test/e2e/probeplugins_test.go as
// gordon-probe-<mode> to check that docker-gordon survives them (a misbehaving readiness plugin fails
// the candidate, never the CLI; SPEC R29-R35):
//
//	crash     handshakes, then panics (the process dies) in Check
//	hang      handshakes, then never answers Check (ignores its context)
//	stall     never completes its handshake
//	oldproto  speaks plugin protocol version 99
//	garbage   writes garbage to stdout before the handshake
package badprobes
