package core

import (
	"context"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/routetable"
)

// Traffic is the routing backend (ARCHITECTURE §4, SPEC decision 11). It
// computes nothing: the engine hands it the whole route graph of every app.
type Traffic interface {
	// Apply installs graph and returns the generation the edge confirmed.
	// A rejection or a timeout waiting for confirmation is an error (a
	// rejected rebuild, R21b).
	Apply(ctx context.Context, graph routetable.Graph) (uint64, error)
	// Status returns the applied generation and per-backend in-flight counts.
	Status(ctx context.Context) (TrafficStatus, error)
}

// TrafficStatus is what the edge reports.
type TrafficStatus struct {
	AppliedGeneration uint64                     `json:"applied_generation"`
	Error             string                     `json:"error,omitempty"`
	Backends          []routetable.BackendStatus `json:"backends,omitempty"`
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
