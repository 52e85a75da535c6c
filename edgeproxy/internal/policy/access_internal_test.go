package policy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

func guardFor(t *testing.T, user, pass string) *Guard {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	require.NoError(t, err)
	g := NewGuard(routetable.HTTPRoute{Host: "a.test", BasicAuth: []string{user + ":" + string(h)}})
	require.NotNil(t, g)
	return g
}

// R73 (password check bounds): a verified password is remembered, so the
// same credentials pass again without a check slot (no bcrypt); a wrong
// password, an unknown user, or the same password under a new hash each
// need a slot, and while every slot stays busy past the wait they get
// authBusy (429) instead of queueing.
func TestR73_VerifiedCredentialsAreCachedAndChecksAreBounded(t *testing.T) {
	a := NewVerifier()
	a.wait = 20 * time.Millisecond
	ctx := context.Background()
	g := guardFor(t, "alice", "s3cret")
	require.Equal(t, authOK, a.verify(ctx, g, "alice", "s3cret"))
	require.Equal(t, authDenied, a.verify(ctx, g, "alice", "wrong"))
	require.Equal(t, authDenied, a.verify(ctx, g, "bob", "s3cret"))

	for range cap(a.slots) { // every slot busy
		a.slots <- struct{}{}
	}
	assert.Equal(t, authOK, a.verify(ctx, g, "alice", "s3cret"), "cached: no slot needed")
	assert.Equal(t, authBusy, a.verify(ctx, g, "alice", "wrong"), "uncached: busy, not queued")
	assert.Equal(t, authBusy, a.verify(ctx, g, "bob", "s3cret"), "unknown user costs a check too")
	g2 := guardFor(t, "alice", "s3cret") // same password, new hash (new salt)
	assert.Equal(t, authBusy, a.verify(ctx, g2, "alice", "s3cret"), "a new hash is not served from the cache")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	a.wait = time.Hour
	assert.Equal(t, authBusy, a.verify(canceled, g, "alice", "wrong"), "a gone client stops waiting")
	for range cap(a.slots) {
		<-a.slots
	}
	assert.Equal(t, authOK, a.verify(ctx, g2, "alice", "s3cret"))
}

// R73: the cache stays within authCacheEntries however many distinct
// credentials pass: a full cache drops one entry for each new one.
func TestR73_AuthCacheIsBounded(t *testing.T) {
	a := NewVerifier()
	g := guardFor(t, "alice", "s3cret")
	for i := range authCacheEntries {
		a.ok[a.cacheKey("alice", fmt.Sprint(i), g.users["alice"])] = struct{}{}
	}
	require.Equal(t, authOK, a.verify(context.Background(), g, "alice", "s3cret"))
	assert.Len(t, a.ok, authCacheEntries)
	assert.Contains(t, a.ok, a.cacheKey("alice", "s3cret", g.users["alice"]))
}

// BenchmarkR73_Verify compares a bcrypt check at cost 10 (a first
// request) with a cached one (the next requests of a client).
func BenchmarkR73_Verify(b *testing.B) {
	h, err := bcrypt.GenerateFromPassword([]byte("s3cret"), 10)
	require.NoError(b, err)
	g := NewGuard(routetable.HTTPRoute{Host: "a.test", BasicAuth: []string{"alice:" + string(h)}})
	b.Run("bcrypt", func(b *testing.B) {
		a := NewVerifier()
		for b.Loop() {
			clear(a.ok)
			if a.verify(context.Background(), g, "alice", "s3cret") != authOK {
				b.Fatal("not verified")
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		a := NewVerifier()
		require.Equal(b, authOK, a.verify(context.Background(), g, "alice", "s3cret"))
		for b.Loop() {
			if a.verify(context.Background(), g, "alice", "s3cret") != authOK {
				b.Fatal("not verified")
			}
		}
	})
}
