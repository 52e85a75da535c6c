package policy

import (
	"context"
	"fmt"
	"net/netip"
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

	for range cap(g.slots) { // every slot of the route busy
		g.slots <- struct{}{}
	}
	assert.Equal(t, authOK, a.verify(ctx, g, "alice", "s3cret"), "cached: no slot needed")
	assert.Equal(t, authBusy, a.verify(ctx, g, "alice", "wrong"), "uncached: busy, not queued")
	assert.Equal(t, authBusy, a.verify(ctx, g, "bob", "s3cret"), "unknown user costs a check too")
	g2 := guardFor(t, "alice", "s3cret") // same password, new hash (new salt)
	for range cap(g2.slots) {
		g2.slots <- struct{}{}
	}
	assert.Equal(t, authBusy, a.verify(ctx, g2, "alice", "s3cret"), "a new hash is not served from the cache")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	a.wait = time.Hour
	assert.Equal(t, authBusy, a.verify(canceled, g, "alice", "wrong"), "a gone client stops waiting")
	for range cap(g2.slots) {
		<-g2.slots
	}
	assert.Equal(t, authOK, a.verify(ctx, g2, "alice", "s3cret"))
}

// R73 (password check slots per route): while every check slot of one
// host stays busy (a flood of wrong passwords), another host's first login
// is checked at once, never 429; the edge-wide bound is a multiple of a
// route's share, so a flood on one route never reaches it.
func TestR73_PasswordFloodOnOneHostNeverRefusesAnotherHostsFirstLogin(t *testing.T) {
	a := NewVerifier()
	a.wait = 20 * time.Millisecond
	ctx := context.Background()
	flooded, other := guardFor(t, "alice", "s3cret"), guardFor(t, "bob", "hunter2")
	for range cap(flooded.slots) {
		flooded.slots <- struct{}{}
		a.cpu <- struct{}{} // the flood's checks hold the edge's slots too
	}
	assert.Equal(t, authBusy, a.verify(ctx, flooded, "alice", "wrong"), "the flooded host waits for its own slots")
	assert.Equal(t, authOK, a.verify(ctx, other, "bob", "hunter2"), "another host's first login is checked")
	assert.Equal(t, authDenied, a.verify(ctx, other, "bob", "wrong"))
	assert.GreaterOrEqual(t, cap(a.cpu), 2*cap(flooded.slots), "one route's flood leaves the edge's bound room")
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

// R73: the client address is the peer unless the peer is a trusted proxy;
// then it is the right-most X-Forwarded-For hop that is not one (across
// repeated fields, ports and brackets stripped, IPv4-mapped unmapped), the
// left-most when all are, and the zero Addr when that hop does not parse.
func TestR73_ClientAddrIsRightmostUntrustedHop(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"untrusted peer ignores xff", "192.0.2.1:5000", []string{"6.6.6.6"}, "192.0.2.1"},
		{"trusted peer without xff", "10.0.0.1:5000", nil, "10.0.0.1"},
		{"right-most untrusted hop", "10.0.0.1:5000", []string{"6.6.6.6, 198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{"across fields", "10.0.0.1:5000", []string{"198.51.100.7", "10.0.0.3:80, [::ffff:10.0.0.4]:81"}, "198.51.100.7"},
		{"all trusted: left-most", "10.0.0.1:5000", []string{"10.0.0.9, 10.0.0.2"}, "10.0.0.9"},
		{"mapped peer", "[::ffff:10.0.0.1]:5000", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"garbage hop", "10.0.0.1:5000", []string{"198.51.100.7, nope"}, "invalid IP"},
	} {
		got := clientAddr(tc.remote, tc.xff, trusted)
		assert.Equal(t, tc.want, got.String(), tc.name)
	}
}
