// Package l4 relays the edge's TCP and UDP traffic: it serves every
// connection and datagram that reaches a listen port of the route table's
// TCP and UDP routes (routetable.L4Route, SPEC decision 11), and no HTTP
// request.
//
// TCPRelays (tcp.go) binds one listener per TCP route, sends each new
// connection round-robin to an instance not ejected, holds connections
// while a service is between generations (R58), and replaces a backend
// that fails before its first byte with the listener's current one,
// replaying what the client sent (tcp_failover.go, R67). UDPRelays
// (udp.go) pins each client address to a session on the backend current
// at its first datagram; sessions are bounded per listener, per source and
// by descriptors, and end when idle.
//
// The edge (package edgeproxy) runs both: it binds the sockets (so they
// survive a hand-over), and its backend registry implements Backends, so
// relayed connections count on the same backends as HTTP requests. This
// package imports nothing of the edge.
package l4
