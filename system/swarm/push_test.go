package swarm

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A push without credentials still carries an X-Registry-Auth header (the
// empty credential "{}"): an engine of the 20.10 series refuses a push
// without one ("Bad parameters and missing X-Registry-Auth: EOF"), which
// failed every `system start` run in the runner (no credentials there).
// Given credentials are sent as they are.
func TestPushImage_AlwaysSendsAnXRegistryAuthHeader(t *testing.T) {
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/tag"):
			w.WriteHeader(http.StatusCreated)
		case strings.HasSuffix(r.URL.Path, "/push"):
			mu.Lock()
			auths = append(auths, r.Header.Get("X-Registry-Auth"))
			mu.Unlock()
			_, _ = w.Write([]byte(`{"status":"pushed"}` + "\n"))
		case strings.HasSuffix(r.URL.Path, "/json"):
			_ = json.NewEncoder(w).Encode(map[string]any{"Id": "sha256:1",
				"RepoDigests": []string{"reg.lab:5000/gordon-edge@sha256:" + strings.Repeat("a", 64)}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	api, err := client.New(client.WithHost("tcp://"+strings.TrimPrefix(srv.URL, "http://")), client.WithAPIVersion("1.41"))
	require.NoError(t, err)

	ref, err := PushImage(context.Background(), api, "gordon-system/edge:1", "reg.lab:5000", "1", "")
	require.NoError(t, err)
	assert.Equal(t, "reg.lab:5000/gordon-edge@sha256:"+strings.Repeat("a", 64), ref)
	_, err = PushImage(context.Background(), api, "gordon-system/edge:1", "reg.lab:5000", "1", "dG9rZW4=")
	require.NoError(t, err)
	assert.Equal(t, []string{"e30=", "dG9rZW4="}, auths)
}

// R80: the edge image's tag is its content hash; when the registry already
// holds that tag (another manager's system start pushed the same binary),
// its digest is reused and nothing is pushed, so the edge service's spec
// (and every edge task) stays as it is.
func TestPushImage_ATagTheRegistryHoldsIsReusedNotPushedAgain(t *testing.T) {
	held := "sha256:" + strings.Repeat("b", 64)
	var mu sync.Mutex
	pushes := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "/distribution/") && strings.Contains(r.URL.Path, "gordon-edge:held"):
			_ = json.NewEncoder(w).Encode(map[string]any{"Descriptor": map[string]any{
				"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "digest": held, "size": 10}})
		case strings.Contains(r.URL.Path, "/distribution/"):
			http.Error(w, `{"message":"manifest unknown"}`, http.StatusNotFound)
		case strings.HasSuffix(r.URL.Path, "/tag"):
			w.WriteHeader(http.StatusCreated)
		case strings.HasSuffix(r.URL.Path, "/push"):
			mu.Lock()
			pushes++
			mu.Unlock()
			_, _ = w.Write([]byte(`{"status":"pushed"}` + "\n"))
		case strings.HasSuffix(r.URL.Path, "/json"):
			_ = json.NewEncoder(w).Encode(map[string]any{"Id": "sha256:1",
				"RepoDigests": []string{"reg.lab:5000/gordon-edge@sha256:" + strings.Repeat("a", 64)}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	api, err := client.New(client.WithHost("tcp://"+strings.TrimPrefix(srv.URL, "http://")), client.WithAPIVersion("1.41"))
	require.NoError(t, err)

	ref, err := PushImage(context.Background(), api, "gordon-system/edge:held", "reg.lab:5000", "held", "")
	require.NoError(t, err)
	assert.Equal(t, "reg.lab:5000/gordon-edge@"+held, ref, "the registry's digest of the tag")
	assert.Zero(t, pushes, "nothing pushed")

	ref, err = PushImage(context.Background(), api, "gordon-system/edge:new", "reg.lab:5000", "new", "")
	require.NoError(t, err)
	assert.Equal(t, "reg.lab:5000/gordon-edge@sha256:"+strings.Repeat("a", 64), ref)
	assert.Equal(t, 1, pushes, "a tag the registry lacks is pushed")
}
