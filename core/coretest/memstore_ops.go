package coretest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/gordon-deploy/docker-gordon/core"
)

// stepsDetail is the journal-save event detail.
func stepsDetail(op core.Operation) string {
	type st struct {
		ID    string         `json:"id"`
		State core.StepState `json:"state"`
		After string         `json:"after,omitempty"`
	}
	var ss []st
	for _, s := range op.Steps {
		ss = append(ss, st{s.ID, s.State, s.After})
	}
	b, _ := json.Marshal(struct {
		Steps   []st         `json:"steps"`
		Outcome core.Outcome `json:"outcome,omitempty"`
	}{ss, op.Outcome})
	return string(b)
}

// ClaimOp implements core.Store (event journal-claim). A key already used
// in the app returns the stored op unclaimed; an id already used is
// ErrConflict.
func (s *MemStore) ClaimOp(ctx context.Context, op core.Operation) (core.Operation, bool, error) {
	if err := s.enter("ClaimOp"); err != nil {
		return core.Operation{}, false, err
	}
	defer s.mu.Unlock()
	for _, o := range s.ops[op.App] {
		if op.Key != "" && o.Key == op.Key {
			s.ok("ClaimOp")
			return clone(o), false, nil
		}
		if o.ID == op.ID {
			return core.Operation{}, false, fmt.Errorf("app %s op %s already exists: %w", op.App, op.ID, core.ErrConflict)
		}
	}
	op = clone(op)
	s.ops[op.App] = append(s.ops[op.App], op)
	s.latest[op.App] = op.ID
	s.known[op.App] = true
	s.ok("ClaimOp")
	s.ev.AddDetail("journal-claim", op.ID, stepsDetail(op))
	return clone(op), true, nil
}

// SaveOp implements core.Store (event journal-save). An op never claimed is
// stored too (it does not become latest).
func (s *MemStore) SaveOp(ctx context.Context, op core.Operation) error {
	if err := s.enter("SaveOp"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	c := clone(op)
	found := false
	for i, o := range s.ops[op.App] {
		if o.ID == op.ID {
			s.ops[op.App][i] = c
			found = true
			break
		}
	}
	if !found {
		s.ops[op.App] = append(s.ops[op.App], c)
		s.known[op.App] = true
	}
	s.ok("SaveOp")
	s.ev.AddDetail("journal-save", op.ID, stepsDetail(op))
	return nil
}

// LoadOp implements core.Store.
func (s *MemStore) LoadOp(ctx context.Context, app, id string) (core.Operation, error) {
	if err := s.enter("LoadOp"); err != nil {
		return core.Operation{}, err
	}
	defer s.mu.Unlock()
	for _, o := range s.ops[app] {
		if o.ID == id {
			s.ok("LoadOp")
			return clone(o), nil
		}
	}
	return core.Operation{}, nf("app " + app + " op " + id)
}

// LatestOp implements core.Store.
func (s *MemStore) LatestOp(ctx context.Context, app string) (core.Operation, error) {
	if err := s.enter("LatestOp"); err != nil {
		return core.Operation{}, err
	}
	defer s.mu.Unlock()
	id, ok := s.latest[app]
	if ok {
		for _, o := range s.ops[app] {
			if o.ID == id {
				s.ok("LatestOp")
				return clone(o), nil
			}
		}
	}
	return core.Operation{}, nf("app " + app + " latest op")
}

// ListOps implements core.Store (oldest first).
func (s *MemStore) ListOps(ctx context.Context, app string) ([]core.Operation, error) {
	if err := s.enter("ListOps"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	s.ok("ListOps")
	return clone(append([]core.Operation{}, s.ops[app]...)), nil
}

// Op returns a stored op without counters (zero, false when absent).
func (s *MemStore) Op(app, id string) (core.Operation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.ops[app] {
		if o.ID == id {
			return clone(o), true
		}
	}
	return core.Operation{}, false
}

// LoadMarkers implements core.Store (creation time, then container ID).
func (s *MemStore) LoadMarkers(ctx context.Context, app string) ([]core.Marker, error) {
	if err := s.enter("LoadMarkers"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	s.ok("LoadMarkers")
	return s.sortedMarkers(app), nil
}

func (s *MemStore) sortedMarkers(app string) []core.Marker {
	ms := clone(append([]core.Marker{}, s.markers[app]...))
	sort.SliceStable(ms, func(i, j int) bool {
		if !ms[i].CreatedAt.Equal(ms[j].CreatedAt) {
			return ms[i].CreatedAt.Before(ms[j].CreatedAt)
		}
		return ms[i].Container < ms[j].Container
	})
	return ms
}

// Markers returns app's markers without counters.
func (s *MemStore) Markers(app string) []core.Marker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sortedMarkers(app)
}

// MarkerContainers returns the containers of app's markers, in order.
func (s *MemStore) MarkerContainers(app string) []string {
	out := []string{}
	for _, m := range s.Markers(app) {
		out = append(out, m.Container)
	}
	return out
}

// SaveMarker implements core.Store (event marker-save, Detail reason).
func (s *MemStore) SaveMarker(ctx context.Context, m core.Marker) error {
	if err := s.enter("SaveMarker"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	ms := s.markers[m.App]
	replaced := false
	for i := range ms {
		if ms[i].Service == m.Service && ms[i].Container == m.Container {
			ms[i] = clone(m)
			replaced = true
		}
	}
	if !replaced {
		ms = append(ms, clone(m))
	}
	s.markers[m.App] = ms
	s.known[m.App] = true
	s.ok("SaveMarker")
	s.ev.AddDetail("marker-save", m.Container, m.Reason)
	return nil
}

// ClearMarker implements core.Store (event marker-clear, also when absent).
func (s *MemStore) ClearMarker(ctx context.Context, app, service, container string) error {
	if err := s.enter("ClearMarker"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var keep []core.Marker
	for _, m := range s.markers[app] {
		if !(m.Service == service && m.Container == container) {
			keep = append(keep, m)
		}
	}
	s.markers[app] = keep
	s.ok("ClearMarker")
	s.ev.AddDetail("marker-clear", container, service)
	return nil
}

// RegisterClaims implements core.Store (event claims-register per
// container); a claim replaces any with the same port and protocol.
func (s *MemStore) RegisterClaims(ctx context.Context, claims []core.Claim) error {
	if err := s.enter("RegisterClaims"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for _, c := range claims {
		if c.Protocol == "" {
			c.Protocol = "tcp"
		}
		kept := s.claims[:0:0]
		for _, x := range s.claims {
			if !(x.Port == c.Port && x.Protocol == c.Protocol) {
				kept = append(kept, x)
			}
		}
		s.claims = append(kept, c)
		s.ev.AddDetail("claims-register", c.Container, fmt.Sprintf("%d/%s", c.Port, c.Protocol))
	}
	sort.SliceStable(s.claims, func(i, j int) bool {
		if s.claims[i].Port != s.claims[j].Port {
			return s.claims[i].Port < s.claims[j].Port
		}
		return s.claims[i].Protocol < s.claims[j].Protocol
	})
	s.ok("RegisterClaims")
	return nil
}

// ReleaseClaims implements core.Store (event claims-release).
func (s *MemStore) ReleaseClaims(ctx context.Context, app, container string) error {
	if err := s.enter("ReleaseClaims"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var kept []core.Claim
	for _, c := range s.claims {
		if !(c.App == app && c.Container == container) {
			kept = append(kept, c)
		}
	}
	s.claims = kept
	s.ok("ReleaseClaims")
	s.ev.Add("claims-release", container)
	return nil
}

// ListClaims implements core.Store (by port).
func (s *MemStore) ListClaims(ctx context.Context) ([]core.Claim, error) {
	if err := s.enter("ListClaims"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	s.ok("ListClaims")
	return append([]core.Claim{}, s.claims...), nil
}

// ClaimsOf returns the claims of container without counters.
func (s *MemStore) ClaimsOf(container string) []core.Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []core.Claim{}
	for _, c := range s.claims {
		if c.Container == container {
			out = append(out, c)
		}
	}
	return out
}
