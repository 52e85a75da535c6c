package logprobe_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	logprobe "github.com/gordon-deploy/docker-gordon/plugins/probe/log"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

func TestProbeSuite_Log(t *testing.T) {
	t.Run("InProcess", func(t *testing.T) {
		sdktest.ProbeSuite(t, func(*testing.T) core.Prober { return logprobe.New(&logRuntime{}) })
	})
	t.Run("ThroughTheWire", func(t *testing.T) {
		sdktest.ProbeSuite(t, func(t *testing.T) core.Prober { return sdktest.ServeProbe(t, logprobe.New(&logRuntime{})) })
	})
}

func TestR34_LogProbeThroughTheWire(t *testing.T) {
	rt := &logRuntime{}
	start := t0.Add(time.Second)
	rt.add("c-new", start.Add(time.Second), "ready to accept connections")
	p := sdktest.ServeProbe(t, logprobe.New(rt))
	res, err := p.Check(context.Background(), logReq("c-new", start, "ready to accept"))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)
	require.Len(t, rt.calls, 1)
	assert.True(t, rt.calls[0].Since.Equal(start.Add(-logprobe.StartSkew)), "start time survives the wire")

	res, err = p.Check(context.Background(), logReq("c-new", time.Time{}, "ready to accept"))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Equal(t, logprobe.DetailNoStartTime, res.Detail, "zero start time survives the wire")
}
