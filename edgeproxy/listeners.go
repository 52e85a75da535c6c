package edgeproxy

// Listener hand-over (SPEC R60): a new edge takes the listening sockets of
// the running one through a unix socket in the state directory
// (<state>/edge/handover.sock) as passed descriptors (SCM_RIGHTS), so the
// accept queues are never closed: a connection queued while the two edges
// swap is accepted by the new one. The exchange:
//
//	new → old  "take\n"
//	old → new  one message: JSON handoverOffer + every listening descriptor
//	new        binds nothing it was given, starts serving
//	new → old  "serving\n"
//	old        closes its hand-over socket, stops accepting (every
//	           listener: a connection made from here on reaches the new
//	           edge)
//	old → new  EOF: the new edge listens on handover.sock for the next one
//	           and reports ready
//	old        drains its in-flight HTTP requests and TCP connections
//	           within Config.ShutdownTimeout, then Run returns
//
// Until "serving" arrives the old edge keeps serving: a new edge that dies
// half-way costs nothing. Every listener is registered by a name (Server.
// listenStream, Server.listenPacket): "http", "admin", "tcp <addr>",
// "udp <addr>"; one more listener is one more name.

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"time"
)

// HandoverFile is the hand-over socket inside <state>/edge.
const HandoverFile = "handover.sock"

// handoverTimeout bounds each step of the exchange.
const handoverTimeout = 10 * time.Second

// maxHandoverFDs is the most descriptors one hand-over passes (the kernel's
// SCM_MAX_FD is 253).
const maxHandoverFDs = 250

// handoverOffer is the old edge's answer: one entry per passed descriptor,
// in order.
type handoverOffer struct {
	PID       int             `json:"pid"`
	Listeners []handoverEntry `json:"listeners"`
}

type handoverEntry struct {
	Name string `json:"name"` // "http", "admin", "tcp :5432", …
	Addr string `json:"addr"` // the configured listen address
}

// fileSocket is a listener or packet socket that can be duplicated.
type fileSocket interface {
	File() (*os.File, error)
}

// listenerSet is the registry of the edge's listening sockets by name, and
// the descriptors inherited from the previous edge not yet claimed.
type listenerSet struct {
	mu        sync.Mutex
	live      map[string]liveSocket
	inherited map[string]inheritedSocket
}

type liveSocket struct {
	addr string
	sock fileSocket
}

type inheritedSocket struct {
	addr string
	f    *os.File
}

func newListenerSet() *listenerSet {
	return &listenerSet{live: map[string]liveSocket{}, inherited: map[string]inheritedSocket{}}
}

// claim returns the inherited descriptor for name when it was bound to addr
// (nil otherwise; a descriptor for another address is closed).
func (ls *listenerSet) claim(name, addr string) *os.File {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	in, ok := ls.inherited[name]
	if !ok {
		return nil
	}
	delete(ls.inherited, name)
	if in.addr != addr {
		_ = in.f.Close()
		return nil
	}
	return in.f
}

func (ls *listenerSet) register(name, addr string, sock fileSocket) {
	ls.mu.Lock()
	ls.live[name] = liveSocket{addr: addr, sock: sock}
	ls.mu.Unlock()
}

func (ls *listenerSet) forget(name string) {
	ls.mu.Lock()
	delete(ls.live, name)
	ls.mu.Unlock()
}

// dropInherited closes the inherited descriptors nothing claimed (the new
// configuration has no such listener) and returns their names.
func (ls *listenerSet) dropInherited() []string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var names []string
	for name, in := range ls.inherited {
		_ = in.f.Close()
		names = append(names, name)
	}
	ls.inherited = map[string]inheritedSocket{}
	sort.Strings(names)
	return names
}

// files duplicates every live socket's descriptor, sorted by name. The
// caller closes them.
func (ls *listenerSet) files() ([]handoverEntry, []*os.File, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	names := make([]string, 0, len(ls.live))
	for n := range ls.live {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > maxHandoverFDs {
		return nil, nil, fmt.Errorf("%d listeners, at most %d can be handed over", len(names), maxHandoverFDs)
	}
	entries := make([]handoverEntry, 0, len(names))
	files := make([]*os.File, 0, len(names))
	for _, n := range names {
		f, err := ls.live[n].sock.File()
		if err != nil {
			for _, f := range files {
				_ = f.Close()
			}
			return nil, nil, fmt.Errorf("listener %s: %w", n, err)
		}
		entries = append(entries, handoverEntry{Name: n, Addr: ls.live[n].addr})
		files = append(files, f)
	}
	return entries, files, nil
}

// listenStream returns a TCP listener for addr registered as name: the
// previous edge's socket when it handed one over for that name and address,
// else a new one bound with lc.
func (s *Server) listenStream(name, addr string, lc net.ListenConfig) (net.Listener, error) {
	var ln net.Listener
	if f := s.socks.claim(name, addr); f != nil {
		var err error
		ln, err = net.FileListener(f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("inherited listener %s: %w", name, err)
		}
	} else {
		var err error
		if ln, err = lc.Listen(context.Background(), "tcp", addr); err != nil {
			return nil, err
		}
	}
	if fs, ok := ln.(fileSocket); ok {
		s.socks.register(name, addr, fs)
	}
	return ln, nil
}

// listenPacket is listenStream for a UDP socket.
func (s *Server) listenPacket(name, addr string) (*net.UDPConn, error) {
	if f := s.socks.claim(name, addr); f != nil {
		pc, err := net.FilePacketConn(f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("inherited listener %s: %w", name, err)
		}
		u, ok := pc.(*net.UDPConn)
		if !ok {
			_ = pc.Close()
			return nil, fmt.Errorf("inherited listener %s is not a UDP socket", name)
		}
		s.socks.register(name, addr, u)
		return u, nil
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	u, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	s.socks.register(name, addr, u)
	return u, nil
}
