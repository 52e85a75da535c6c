package reconcile

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// StateMirror is the watcher's part in adoption on a swarm (SPEC R80):
// after each pass every app's records go to a Docker config, so another
// manager can adopt them; before each pass the edge service's owner is
// checked, so a state directory another manager took over does nothing.
// A repeated error is logged once. A nil StateMirror does nothing.
type StateMirror struct {
	m               *swarm.Mirror
	cfg             swarm.Config
	log             hclog.Logger
	lastErr, fenced string
	// OnSuperseded runs when a pass finds the state directory superseded.
	OnSuperseded func()
}

// NewStateMirror is the state mirror of stateDir, nil unless it is a
// swarm's (swarm.json reads). tryLock takes an app's lock without
// waiting (nil: the mirror reads records unlocked).
func NewStateMirror(api client.APIClient, stateDir string, tryLock func(ctx context.Context, app string) (func(), bool, error), log hclog.Logger) *StateMirror {
	cfg, ok, err := swarm.Load(stateDir)
	if err != nil || !ok {
		return nil
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	m := &swarm.Mirror{API: api, StateDir: stateDir, Node: cfg.ManagerNode, Owner: cfg.StateID, TryLock: tryLock}
	return &StateMirror{cfg: cfg, m: m, log: log}
}

// Superseded reports whether another state directory drives the edge
// now: the pass is skipped.
func (s *StateMirror) Superseded(ctx context.Context) bool {
	if s == nil {
		return false
	}
	err := swarm.CheckOwner(ctx, s.m.API, s.cfg)
	if !errors.Is(err, core.ErrConflict) {
		s.fenced = ""
		return false
	}
	if msg := err.Error(); msg != s.fenced {
		s.log.Error("passes skipped", "error", err)
		s.fenced = msg
	}
	if s.OnSuperseded != nil {
		s.OnSuperseded()
	}
	return true
}

// Sync mirrors every app's records (after a pass).
func (s *StateMirror) Sync(ctx context.Context) {
	if s == nil {
		return
	}
	err := s.m.Sync(ctx)
	msg := ""
	if err != nil && ctx.Err() == nil {
		msg = err.Error()
	}
	if msg != "" && msg != s.lastErr {
		s.log.Error("state mirror: another manager could not adopt the latest records", "error", err)
	}
	s.lastErr = msg
}
