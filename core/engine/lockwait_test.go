package engine_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// TestDecision2_LockWaitSaysSoAtOnceAndNamesTheHolder: a verb that finds
// the app locked says so before it waits (while the holder still holds
// it), naming the holder's pid, verb and op, then proceeds once the lock
// is released.
func TestDecision2_LockWaitSaysSoAtOnceAndNamesTheHolder(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	host, _ := os.Hostname()
	lock, err := h.Store.Lock(context.Background(), "blog", core.LockHolder{PID: 4242, Verb: "deploy", Op: "op-0123", Host: host})
	require.NoError(t, err)
	notices := make(chan string, 4)
	h.Engine.LockWait = func(msg string) { notices <- msg }
	done := make(chan error, 1)
	go func() {
		_, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
		done <- err
	}()
	select {
	case msg := <-notices:
		assert.Contains(t, msg, "app blog: restart waits for the app lock, held by pid 4242 (deploy, op op-0123")
		assert.Contains(t, msg, "host "+host)
		assert.Contains(t, msg, "--lock-timeout")
	case err := <-done:
		t.Fatalf("restart finished (%v) without saying it waited for the lock", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no lock-wait notice within 10s")
	}
	select {
	case err := <-done:
		t.Fatalf("restart ran while the lock was held: %v", err)
	default:
	}
	require.NoError(t, lock.Unlock())
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("restart did not proceed after the lock was released")
	}
	assert.Empty(t, notices, "one notice per wait")
}
