package journal

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TestR1_LockWaitsForOtherProcess: another process holds the app lock for
// 400 ms; meanwhile TryLock reports busy and LockHolder names it; Lock waits
// and succeeds only after the other process released it.
func TestR1_LockWaitsForOtherProcess(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, WithLockPoll(10*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	h := startHelper(t, "locker", dir, envHold+"=400ms")
	h.expect(t, "locked", 10*time.Second)
	lockedSeen := time.Now()

	_, ok, err := s.TryLock(ctx, "blog", core.LockHolder{Verb: "reconcile"})
	require.NoError(t, err)
	assert.False(t, ok, "TryLock must report the other process's lock as busy")
	holder, err := s.LockHolder(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, h.cmd.Process.Pid, holder.PID)
	assert.Equal(t, "deploy", holder.Verb)
	assert.Equal(t, "op-child", holder.Op)

	l, err := s.Lock(ctx, "blog", core.LockHolder{Verb: "stop", Op: "op-parent"})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(lockedSeen), 250*time.Millisecond, "Lock returned while the other process still held the lock")
	h.expect(t, "unlocked", 5*time.Second)
	holder, err = s.LockHolder(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), holder.PID)
	assert.Equal(t, "op-parent", holder.Op)
	require.NoError(t, l.Unlock())
	require.NoError(t, h.cmd.Wait())
}

// TestDecision2_DeadHolderTakenOver: a holder killed with SIGKILL leaves its
// lock.json behind; it is reported stale (not a current holder) and the lock
// is taken over at once.
func TestDecision2_DeadHolderTakenOver(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, WithLockPoll(10*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	h := startHelper(t, "locker", dir, envHold+"=forever")
	h.expect(t, "locked", 10*time.Second)
	childPID := h.cmd.Process.Pid
	h.kill9(t)

	require.FileExists(t, filepath.Join(dir, "apps", "blog", "lock.json"), "a killed holder cannot clean up")
	_, err = s.LockHolder(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), strconv.Itoa(childPID))

	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	l, err := s.Lock(short, "blog", core.LockHolder{Verb: "deploy", Op: "op-takeover"})
	require.NoError(t, err)
	holder, err := s.LockHolder(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), holder.PID)
	assert.Equal(t, "op-takeover", holder.Op, "the stale record is overwritten")
	require.NoError(t, l.Unlock())
}

// TestDecision2_LockTimeoutNamesHolder: when ctx ends first, Lock fails
// with core.ErrConflict naming pid, verb, op and start time of the holder.
func TestDecision2_LockTimeoutNamesHolder(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, WithLockPoll(10*time.Millisecond))
	require.NoError(t, err)
	h := startHelper(t, "locker", dir, envHold+"=forever")
	h.expect(t, "locked", 10*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Lock(ctx, "blog", core.LockHolder{Verb: "stop"})
	require.ErrorIs(t, err, core.ErrConflict)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	msg := err.Error()
	assert.Contains(t, msg, "app blog is locked by pid "+strconv.Itoa(h.cmd.Process.Pid))
	assert.Contains(t, msg, "deploy, op op-child, since ")
	h.kill9(t)
}

// TestDecision2_TrafficLockIsGlobalAndSeparate: LockTraffic serializes
// publication across Stores and does not contend with app locks.
func TestDecision2_TrafficLockIsGlobalAndSeparate(t *testing.T) {
	dir := t.TempDir()
	s1, err := Open(dir, WithLockPoll(10*time.Millisecond))
	require.NoError(t, err)
	s2, err := Open(dir, WithLockPoll(10*time.Millisecond))
	require.NoError(t, err)
	ctx := context.Background()

	l1, err := s1.LockTraffic(ctx)
	require.NoError(t, err)
	app, ok, err := s2.TryLock(ctx, "blog", core.LockHolder{Verb: "deploy"})
	require.NoError(t, err)
	require.True(t, ok, "the traffic lock is not an app lock")
	require.NoError(t, app.Unlock())

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = s2.LockTraffic(short)
	require.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "traffic")
	require.NoError(t, l1.Unlock())
	l2, err := s2.LockTraffic(ctx)
	require.NoError(t, err)
	require.NoError(t, l2.Unlock())
}

// TestR1_InvalidAppNameRefused: app names are path components.
func TestR1_InvalidAppNameRefused(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	ctx := context.Background()
	for _, bad := range []string{"", "..", "../etc", "a/b", ".hidden"} {
		_, err := s.Lock(ctx, bad, core.LockHolder{})
		require.ErrorIs(t, err, core.ErrInvalid, "app %q", bad)
		_, err = s.LoadActive(ctx, bad)
		require.ErrorIs(t, err, core.ErrInvalid, "app %q", bad)
		require.ErrorIs(t, s.SaveActive(ctx, core.Active{App: bad}), core.ErrInvalid, "app %q", bad)
	}
}
