package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// edge status shows the routed backends and the retired ones still serving
// something; idle retired backends are one summary line, not one each.
func TestEdgeStatus_IdleRetiredBackendsAreSummed(t *testing.T) {
	view := edgeStatusView{Live: true, AppliedGeneration: 7}
	view.Backends = []routetable.BackendStatus{
		{Addr: "127.0.0.1:4001", InFlight: 2},
		{Addr: "127.0.0.1:4002", OpenConns: 1},
		{Addr: "127.0.0.1:4003"},
		{Addr: "127.0.0.1:4004"},
	}
	view.RetiredBackends = []string{"127.0.0.1:4002", "127.0.0.1:4003", "127.0.0.1:4004"}
	var out bytes.Buffer
	require.NoError(t, renderEdgeStatus(&out, view))
	s := out.String()
	assert.Regexp(t, `127\.0\.0\.1:4001\s+routed\s+2\s+0`, s)
	assert.Regexp(t, `127\.0\.0\.1:4002\s+retired\s+0\s+1`, s, "a retired backend with an open connection keeps its line")
	assert.NotContains(t, s, "127.0.0.1:4003")
	assert.NotContains(t, s, "127.0.0.1:4004")
	assert.Contains(t, s, "2 retired backends idle (listed by --format json)")
}
