package control

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testCreds(t *testing.T, gen uint64, push, edge string) (Credentials, string) {
	t.Helper()
	ca, caKey, err := NewCA()
	require.NoError(t, err)
	cert, key, err := Issue(ca, caKey, EdgeServerName)
	require.NoError(t, err)
	return Credentials{Generation: gen, PushSHA256: []string{HashToken(push)}, EdgeTokens: []string{edge}, CA: ca, Cert: cert, Key: key}, caKey
}

// An edge holds only the push token's hash: it accepts the push token,
// and its own edge token never pushes (so an edge cannot push to the
// other edges); nothing else is accepted.
func TestKeyring_AnEdgeTokenNeverPushes(t *testing.T) {
	c, _ := testCreds(t, 1, "PUSH", "EDGE")
	data, err := json.Marshal(c)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "PUSH", "the push token itself is not in an edge's credentials")
	k, err := New(c)
	require.NoError(t, err)
	assert.True(t, k.AcceptsPush("PUSH"))
	assert.False(t, k.AcceptsPush("EDGE"), "an edge token never pushes")
	assert.True(t, k.AcceptsEdge("EDGE"))
	assert.False(t, k.AcceptsEdge("PUSH"))
	assert.False(t, k.AcceptsPush(""))
	assert.Equal(t, "EDGE", k.EdgeToken())
}

// PUT /control: only a push token installs newer credentials; an older
// or equal generation is 409 and changes nothing; after a rotation the
// old push token is refused and the new one accepted, and a restart of
// the process keeps the update.
func TestKeyring_UpdateRotatesTheTokens(t *testing.T) {
	c, _ := testCreds(t, 1, "P1", "E1")
	dir := t.TempDir()
	secret, saved := filepath.Join(dir, "secret"), filepath.Join(dir, "control.json")
	data, _ := json.Marshal(c)
	require.NoError(t, os.WriteFile(secret, data, 0o600))
	k, err := Load(secret, saved, func(b []byte) error { return os.WriteFile(saved, b, 0o600) })
	require.NoError(t, err)

	put := func(tok string, upd Credentials) int {
		body, _ := json.Marshal(upd)
		r := httptest.NewRequest(http.MethodPut, "/control", strings.NewReader(string(body)))
		r.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		k.ServeUpdate(w, r)
		return w.Code
	}
	both := Credentials{Generation: 2, PushSHA256: []string{HashToken("P2"), HashToken("P1")}, EdgeTokens: []string{"E2", "E1"}}
	assert.Equal(t, http.StatusUnauthorized, put("E1", both), "an edge token cannot change credentials")
	assert.Equal(t, 1, int(k.Generation()))
	assert.Equal(t, http.StatusOK, put("P1", both))
	assert.True(t, k.AcceptsPush("P1") && k.AcceptsPush("P2"), "both accepted during the rotation")
	assert.Equal(t, "E2", k.EdgeToken(), "the new edge token is sent")
	assert.Equal(t, http.StatusConflict, put("P2", both), "same generation: nothing changes")
	only := Credentials{Generation: 3, PushSHA256: []string{HashToken("P2")}, EdgeTokens: []string{"E2"}}
	assert.Equal(t, http.StatusOK, put("P2", only))
	assert.False(t, k.AcceptsPush("P1"), "the old push token is refused")
	assert.False(t, k.AcceptsEdge("E1"), "the old edge token is refused")
	assert.True(t, k.AcceptsPush("P2"))

	again, err := Load(secret, saved, nil)
	require.NoError(t, err)
	assert.Equal(t, 3, int(again.Generation()), "a restart in the same task keeps the update")
	assert.False(t, again.AcceptsPush("P1"))
}

// The channel is TLS with the control CA pinned: a client pinning the
// CA reaches the edge's certificate; one pinning another CA fails.
func TestKeyring_TLSPinsTheControlCA(t *testing.T) {
	c, _ := testCreds(t, 1, "P", "E")
	k, err := New(c)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.TLS = k.ServerTLS()
	srv.StartTLS()
	defer srv.Close()
	pinned := &http.Client{Transport: &http.Transport{TLSClientConfig: k.ClientTLS(EdgeServerName)}}
	resp, err := pinned.Get(srv.URL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	other, _ := testCreds(t, 1, "P", "E")
	ko, err := New(other)
	require.NoError(t, err)
	foreign := &http.Client{Transport: &http.Transport{TLSClientConfig: ko.ClientTLS(EdgeServerName)}}
	_, err = foreign.Get(srv.URL)
	require.Error(t, err, "a certificate of another CA is refused")
	wrongName := &http.Client{Transport: &http.Transport{TLSClientConfig: k.ClientTLS(StorageServerName)}}
	_, err = wrongName.Get(srv.URL)
	require.Error(t, err, "the edge's certificate is not the storage's")
}
