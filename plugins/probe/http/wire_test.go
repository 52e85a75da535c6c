package httpprobe_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	httpprobe "github.com/gordon-deploy/docker-gordon/plugins/probe/http"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

func TestProbeSuite_HTTP(t *testing.T) {
	t.Run("InProcess", func(t *testing.T) {
		sdktest.ProbeSuite(t, func(*testing.T) core.Prober { return httpprobe.New() })
	})
	t.Run("ThroughTheWire", func(t *testing.T) {
		sdktest.ProbeSuite(t, func(t *testing.T) core.Prober { return sdktest.ServeProbe(t, httpprobe.New()) })
	})
}

func TestDecision9_HostHeaderThroughTheWire(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "blog.example.com" {
			w.WriteHeader(http.StatusMisdirectedRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	p := sdktest.ServeProbe(t, httpprobe.New())
	res, err := p.Check(context.Background(), probeReq(b.addr(), "/healthz", "blog.example.com"))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)
	assert.Equal(t, "GET http://"+b.addr()+"/healthz: 200 OK", res.Detail)
}
