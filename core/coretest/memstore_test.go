package coretest

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TestMemStore_StoreSuite runs the store conformance suite (STYLE 8).
func TestMemStore_StoreSuite(t *testing.T) {
	StoreSuite(t, func(t *testing.T) core.Store { return NewMemStore(nil) })
}

// TestMemStore_DeepCopies: neither a saved nor a loaded record aliases the
// stored one.
func TestMemStore_DeepCopies(t *testing.T) {
	ctx := context.Background()
	s := NewMemStore(nil)
	a := core.Active{App: "blog", Services: map[string]*core.ActiveService{"web": {Container: "c-1", BackendBinds: map[int]int{8080: 17000}}}}
	require.NoError(t, s.SaveActive(ctx, a))
	a.Services["web"].BackendBinds[8080] = 1
	got, err := s.LoadActive(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, 17000, got.Services["web"].BackendBinds[8080])
	got.Services["web"].Container = "c-x"
	again, _ := s.LoadActive(ctx, "blog")
	assert.Equal(t, "c-1", again.Services["web"].Container)
}

// TestMemStore_FaultInjection: FailNext fails exactly once and changes
// nothing; counters and the effect log see only successes.
func TestMemStore_FaultInjection(t *testing.T) {
	ctx := context.Background()
	ev := &Events{}
	s := NewMemStore(ev)
	boom := errors.New("disk full")
	s.FailNext("SaveMarker", boom)
	m := core.Marker{App: "blog", Service: "web", Container: "c-old", Reason: core.MarkerRetirementPending}
	require.ErrorIs(t, s.SaveMarker(ctx, m), boom)
	assert.Empty(t, s.Markers("blog"))
	require.NoError(t, s.SaveMarker(ctx, m))
	assert.Equal(t, []string{"c-old"}, s.MarkerContainers("blog"))
	assert.Equal(t, 1, s.Saves("SaveMarker"))
	assert.Equal(t, 2, s.Calls("SaveMarker"))
	assert.Equal(t, []string{"marker-save c-old"}, ev.Seq("marker-save"))

	s.FailTimes("LoadMarkers", boom, 2)
	for i := 0; i < 2; i++ {
		_, err := s.LoadMarkers(ctx, "blog")
		require.ErrorIs(t, err, boom)
	}
	_, err := s.LoadMarkers(ctx, "blog")
	require.NoError(t, err)

	s.FailTimes("ReleaseClaims", boom, 0)
	for i := 0; i < 3; i++ {
		require.Error(t, s.ReleaseClaims(ctx, "blog", "c-old"))
	}
	s.ClearFailures()
	require.NoError(t, s.ReleaseClaims(ctx, "blog", "c-old"))
}

// TestMemStore_LockIsExclusive: a second Lock waits until ctx ends and
// names the holder; TryLock reports busy; Unlock is idempotent.
func TestMemStore_LockIsExclusive(t *testing.T) {
	s := NewMemStore(nil)
	l, err := s.Lock(context.Background(), "blog", core.LockHolder{PID: 42, Verb: "deploy", Op: "op-1"})
	require.NoError(t, err)
	_, ok, err := s.TryLock(context.Background(), "blog", core.LockHolder{PID: 43})
	require.NoError(t, err)
	assert.False(t, ok)
	ctx, cancel := context.WithTimeout(context.Background(), 20e6)
	defer cancel()
	_, err = s.Lock(ctx, "blog", core.LockHolder{PID: 44})
	require.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "42")
	assert.Contains(t, err.Error(), "deploy")
	require.NoError(t, l.Unlock())
	require.NoError(t, l.Unlock())
	l2, ok, err := s.TryLock(context.Background(), "blog", core.LockHolder{PID: 45})
	require.NoError(t, err)
	require.True(t, ok)
	h, err := s.LockHolder(context.Background(), "blog")
	require.NoError(t, err)
	assert.Equal(t, 45, h.PID)
	require.NoError(t, l2.Unlock())
	_, err = s.LockHolder(context.Background(), "blog")
	assert.ErrorIs(t, err, core.ErrNotFound)
}
