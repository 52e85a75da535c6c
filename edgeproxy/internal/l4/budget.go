package l4

import "sync/atomic"

// Relay bounds every TCP and UDP route gets unless its table entry sets
// its own (routetable.L4Route IdleTimeoutMS, MaxConns).
const (
	// DefaultTCPIdleTimeoutMS (milliseconds) closes a relayed TCP connection silent both
	// ways this long: HAProxy's `timeout client` of its shipped
	// configurations (50 s). A database client that keeps pooled
	// connections idle longer sets idle_timeout on its interface.
	DefaultTCPIdleTimeoutMS = 50_000
	// DefaultTCPMaxConns bounds one TCP route's relayed connections at
	// once: HAProxy's default per-frontend maxconn (2000).
	DefaultTCPMaxConns = 2000
	// DefaultRelayMaxConns bounds every relayed TCP connection and UDP
	// session of the edge together: the global maxconn of HAProxy's
	// shipped configurations (4000).
	DefaultRelayMaxConns = 4000
	// MinDescriptorReserve is the least of the process's descriptors the
	// relays leave to HTTP and the edge itself (DefaultDescriptorReserve).
	MinDescriptorReserve = 256
)

// DefaultDescriptorReserve is the share of the descriptor limit the relays
// never use, so that HTTP keeps being served while they are full: a
// quarter of limit, at least MinDescriptorReserve.
func DefaultDescriptorReserve(limit int) int {
	return max(limit/4, MinDescriptorReserve)
}

// DescriptorLimit is the process's open-descriptor limit (the soft one; Go
// raises it to the hard one at start; 1<<20 where it is unknown).
func DescriptorLimit() int { return descriptorLimit() }

// Budget is what every relay of an edge shares: a count of relayed TCP
// connections and UDP sessions, bounded by MaxConns, and of their
// descriptors (two per TCP connection, one per UDP session), bounded by
// the descriptor limit less a reserve. A connection over either bound is
// refused (TCP: closed at accept; UDP: the listener's least recently
// active session is evicted first). Its zero value is not usable: use
// NewBudget.
type Budget struct {
	maxConns, maxFDs int64
	conns, fds       atomic.Int64
}

// NewBudget returns a budget of maxConns connections (<= 0:
// DefaultRelayMaxConns) and of the descriptor limit less reserve
// descriptors (< 0: DefaultDescriptorReserve), at least 16.
func NewBudget(maxConns, reserve int) *Budget {
	limit := descriptorLimit()
	if maxConns <= 0 {
		maxConns = DefaultRelayMaxConns
	}
	if reserve < 0 {
		reserve = DefaultDescriptorReserve(limit)
	}
	return &Budget{maxConns: int64(maxConns), maxFDs: int64(max(limit-reserve, 16))}
}

// acquire takes one connection of fds descriptors, or reports false and
// takes nothing when that would pass a bound.
func (b *Budget) acquire(fds int64) bool {
	if b.conns.Add(1) > b.maxConns {
		b.conns.Add(-1)
		return false
	}
	if b.fds.Add(fds) > b.maxFDs {
		b.fds.Add(-fds)
		b.conns.Add(-1)
		return false
	}
	return true
}

// release gives back what acquire(fds) took.
func (b *Budget) release(fds int64) {
	b.fds.Add(-fds)
	b.conns.Add(-1)
}

// Used returns the connections and descriptors counted now.
func (b *Budget) Used() (conns, fds int64) { return b.conns.Load(), b.fds.Load() }

// Limits returns the bounds: connections, descriptors.
func (b *Budget) Limits() (conns, fds int64) { return b.maxConns, b.maxFDs }
