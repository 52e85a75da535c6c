// Package loadgen is the one closed-loop load generator of the e2e tests
// and the benchmarks (bench/suite, bench/edge). Three drivers share its
// bounds and counting:
//
//   - StartHTTP: N net/http clients, each sending the next request when
//     the previous answered; counts transport errors, non-2xx answers,
//     failed checks (e.g. a wrong protocol) and per-client regressions to
//     an instance it already left; latency percentiles over successful
//     requests; the longest interval without a success (all clients and
//     per client); answered requests per client label.
//   - RunRaw: N raw HTTP/1.1 connections over net.Conn for a fixed time
//     (the generator costs little CPU, so throughput is the target's),
//     keep-alive or a new connection per request.
//   - StartTCP: N dialers that connect and exchange one line per
//     connection; counts refused connects apart from broken exchanges.
//
// Every run targets loopback only (an address that is not 127.0.0.0/8,
// ::1 or localhost is refused) and is bounded in count and time: a run
// that nobody stops ends by itself at MaxRequests per client or
// MaxDuration, and says so (Bounded).
package loadgen

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Default bounds of a run (per client / per run).
const (
	DefaultMaxRequests = 10_000_000
	DefaultMaxDuration = 30 * time.Minute
)

// Bounds limits a run; zero fields take the defaults.
type Bounds struct {
	MaxRequests int64         // per client (connection, dialer)
	MaxDuration time.Duration // for the whole run
}

func (b Bounds) withDefaults() Bounds {
	if b.MaxRequests <= 0 {
		b.MaxRequests = DefaultMaxRequests
	}
	if b.MaxDuration <= 0 {
		b.MaxDuration = DefaultMaxDuration
	}
	return b
}

// ErrNotLoopback is returned for a target outside loopback.
var ErrNotLoopback = errors.New("loadgen: target is not a loopback address")

// CheckLoopback returns ErrNotLoopback (wrapped with addr) unless addr
// ("host:port" or "host") names a loopback IP or localhost.
func CheckLoopback(addr string) error {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %q", ErrNotLoopback, addr)
}

// CheckTarget is CheckLoopback, except when netns names the network
// namespace (under /var/run/netns) this process runs in: a namespace a
// test created (test/swarmlab's lab, entered with nsenter), whose
// addresses are all inside it, so any of them is allowed.
func CheckTarget(addr, netns string) error {
	err := CheckLoopback(addr)
	if err != nil && netns != "" && inNetNS(netns) {
		return nil
	}
	return err
}

// inNetNS reports whether this process's network namespace is the named
// one (same device and inode as /var/run/netns/<name>).
func inNetNS(name string) bool {
	var self, named syscall.Stat_t
	if syscall.Stat("/proc/self/ns/net", &self) != nil || syscall.Stat(filepath.Join("/var/run/netns", name), &named) != nil {
		return false
	}
	return self.Dev == named.Dev && self.Ino == named.Ino
}

// errorLog keeps the first max error texts (distinct ones only when
// distinct is set).
type errorLog struct {
	mu       sync.Mutex
	max      int
	distinct bool
	errs     []string
}

func (l *errorLog) note(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) >= l.max || l.distinct && slices.Contains(l.errs, s) {
		return
	}
	l.errs = append(l.errs, s)
}

func (l *errorLog) copy() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

// percentile p (0..100) of sorted samples (0 when empty).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}
