package routepush

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

type nopEdge struct{}

func (nopEdge) Publish(context.Context, []byte) (bool, error) { return true, nil }
func (nopEdge) Status() routetable.Status                     { return routetable.Status{} }

// A peer at a local address on this edge's admin port is this edge and
// is not asked; an address without a port takes this edge's admin port;
// another port on a local address is another edge (tests, several edges
// on one host); duplicates are asked once.
func TestPeerTargetsSkipThisEdgeAndTakeItsAdminPort(t *testing.T) {
	p := New(Config{
		Token: "t", Peers: "tasks.gordon-edge",
		AdminAddr: func() string { return "0.0.0.0:9180" },
		Lookup: func(context.Context, string) ([]string, error) {
			return []string{"127.0.0.1", "::1", "127.0.0.1:9181", "10.0.9.7", "10.0.9.7:9180", "::ffff:10.0.9.8", "not-an-ip"}, nil
		},
	}, nopEdge{})
	assert.Equal(t, []string{"127.0.0.1:9181", "10.0.9.7:9180", "10.0.9.8:9180"}, p.peerTargets(context.Background()))
}

// A lookup failure or an admin listener not bound yet asks nobody.
func TestPeerTargetsNoneWhenUnresolvedOrUnbound(t *testing.T) {
	p := New(Config{Token: "t", Peers: "x", AdminAddr: func() string { return "127.0.0.1:9180" },
		Lookup: func(context.Context, string) ([]string, error) { return nil, errors.New("no such host") }}, nopEdge{})
	assert.Empty(t, p.peerTargets(context.Background()))
	p = New(Config{Token: "t", Peers: "x",
		Lookup: func(context.Context, string) ([]string, error) { return []string{"10.0.0.1"}, nil }}, nopEdge{})
	assert.Empty(t, p.peerTargets(context.Background()))
}

// Only "Bearer <token>" exactly (surrounding blanks aside) is authorized.
func TestAuthorizedOnlyWithTheBearerToken(t *testing.T) {
	p := New(Config{Token: "tok"}, nopEdge{})
	for auth, want := range map[string]bool{
		"Bearer tok": true, "Bearer  tok ": true, "Bearer tok2": false, "Bearer to": false,
		"bearer tok": false, "tok": false, "": false, "Basic tok": false,
	} {
		r := httptest.NewRequest(http.MethodGet, "/routes", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		assert.Equal(t, want, p.authorized(r, false), "%q", auth)
		assert.Equal(t, want, p.authorized(r, true), "%q", auth)
	}
}

// With split credentials, an edge token pulls (GET /routes) but never
// pushes; the push token does both.
func TestAuthorized_AnEdgeTokenPullsButNeverPushes(t *testing.T) {
	p := New(Config{Auth: splitAuth{push: "P", edge: "E"}}, nopEdge{})
	req := func(tok string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/routes", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return r
	}
	assert.True(t, p.authorized(req("P"), false))
	assert.True(t, p.authorized(req("P"), true))
	assert.False(t, p.authorized(req("E"), false), "an edge token never pushes")
	assert.True(t, p.authorized(req("E"), true))
	assert.False(t, p.authorized(req("X"), true))
}

type splitAuth struct{ push, edge string }

func (a splitAuth) AcceptsPush(tok string) bool { return tok == a.push }
func (a splitAuth) AcceptsEdge(tok string) bool { return tok == a.edge }
func (a splitAuth) EdgeToken() string           { return a.edge }
