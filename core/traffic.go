package core

import (
	"context"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// Traffic is the routing backend (ARCHITECTURE §4, SPEC decision 11). It
// computes nothing: the engine hands it the whole route graph of every app.
type Traffic interface {
	// Apply installs graph and returns the generation the edge confirmed.
	// A rejection or a timeout waiting for confirmation is an error (a
	// rejected rebuild, R21b).
	Apply(ctx context.Context, graph routetable.Graph) (uint64, error)
	// Status returns what the edge serves: the applied generation, its
	// listeners, per-backend in-flight counts and whether the edge itself
	// answered (TrafficStatus.Stale). An edge that never ran for this state
	// directory is an error wrapping ErrUnavailable; one that serves
	// another state directory, ErrConflict. A verb that publishes routes
	// to new containers refuses while Status fails or is Stale (SPEC R68,
	// Engine.RequireLiveTraffic).
	Status(ctx context.Context) (TrafficStatus, error)
}

// TrafficStatus is what the edge reports.
type TrafficStatus struct {
	AppliedGeneration uint64 `json:"applied_generation"`
	// Error is the last rejected route table's error ("" when the last
	// table applied).
	Error    string                     `json:"error,omitempty"`
	Backends []routetable.BackendStatus `json:"backends,omitempty"`
	// Stale is true when the edge did not answer this call itself: the
	// figures are its last written status (from UpdatedAt), not live
	// counts, and the edge is taken as not running. The zero value (a
	// backend that does not tell) is a live edge.
	Stale bool `json:"stale,omitempty"`
	// UpdatedAt is when the edge last wrote its status (zero: unknown).
	UpdatedAt time.Time `json:"status_written_at,omitzero"`
	// Listeners are the edge's public listeners (proto "http", "https",
	// "tcp", "udp"), each with its bind error when it could not listen.
	Listeners []routetable.ListenerStatus `json:"listeners,omitempty"`
	// RetiredBackends are the backends in Backends that no route of the
	// current table leads to any more (the edge keeps their counters a few
	// minutes after a switch).
	RetiredBackends []string `json:"retired_backends,omitempty"`
}

// InFlight returns the in-flight count for backend addr (0 when unknown).
func (s TrafficStatus) InFlight(addr string) int64 {
	for _, b := range s.Backends {
		if b.Addr == addr {
			return b.InFlight
		}
	}
	return 0
}
