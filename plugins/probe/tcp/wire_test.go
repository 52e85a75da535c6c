package tcpprobe_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	tcpprobe "github.com/gordon-deploy/docker-gordon/plugins/probe/tcp"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

func TestProbeSuite_TCP(t *testing.T) {
	t.Run("InProcess", func(t *testing.T) {
		sdktest.ProbeSuite(t, func(*testing.T) core.Prober { return tcpprobe.New() })
	})
	t.Run("ThroughTheWire", func(t *testing.T) {
		sdktest.ProbeSuite(t, func(t *testing.T) core.Prober { return sdktest.ServeProbe(t, tcpprobe.New()) })
	})
}

func TestS34_ClosedAfterAcceptMatchableThroughTheWire(t *testing.T) {
	addr := serve(t, func(c *net.TCPConn) { c.Close() })
	p := sdktest.ServeProbe(t, tcpprobe.New())
	res, err := p.Check(context.Background(), req(addr))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.True(t, core.IsClosedAfterAccept(res.Detail), res.Detail)
}

func TestS40_DeadlineThroughTheWire(t *testing.T) {
	addr := serve(t, holdOpen)
	p := sdktest.ServeProbe(t, tcpprobe.NewWithSettle(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Check(ctx, req(addr))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
}
