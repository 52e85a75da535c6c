// Package evloop is the machinery of the edge's event loops (SPEC decision
// 16): it serves no request itself, but carries the plain-HTTP client
// connections of the public listener that the edge hands to a loop, and
// the backend connections those loops dial, while they are on a loop.
//
// A Poller (poller_linux.go) is one loop's edge-triggered epoll set and
// its eventfd: registration with a serial number in the epoll data (Tag,
// NextSerial, Add), the inbox of descriptors handed to the loop from other
// goroutines (Adopt, TakeInbox) and the wake-ups that interrupt a wait
// (Signal, Wait), and its end (Close). Release takes a descriptor off the
// loop as a net.Conn on Go's poller: the hand-off of a connection to a
// goroutine. Dial (dial_linux.go) starts a non-blocking connect to a
// backend; PeerAddr names a client; RawRead and RawWrite are the loops'
// reads and writes, system calls that skip the scheduler.
//
// The loops themselves (package dataplane, evloop_*_linux.go) keep what
// is HTTP/1.1 and the edge's: the parsing and routing of a request, the
// exchange with its backend, timeouts, pools and the hand-off's state;
// this package imports nothing of the edge. Event loops are Linux only:
// elsewhere the package is empty and every connection is served by a
// goroutine.
package evloop
