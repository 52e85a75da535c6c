package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// edge status shows the routed backends and the retired ones still serving
// something; idle retired backends are one summary line, not one each.
func TestEdgeStatus_IdleRetiredBackendsAreSummed(t *testing.T) {
	view := system.EdgeView{Live: true, AppliedGeneration: 7}
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

// edge status shows an ejected instance (SPEC R21): until when and why, in
// text and in --format json.
func TestR21_EdgeStatusShowsEjections(t *testing.T) {
	until := time.Date(2026, 12, 2, 12, 4, 31, 0, time.UTC)
	view := system.EdgeView{Live: true, AppliedGeneration: 3, Backends: []routetable.BackendStatus{
		{Addr: "172.18.0.2:8080"},
		{Addr: "172.18.0.3:8080", EjectedUntil: until, EjectReason: "connect failed"},
	}}
	var out bytes.Buffer
	require.NoError(t, renderEdgeStatus(&out, view))
	s := out.String()
	assert.Contains(t, s, "EJECTED")
	assert.Regexp(t, `172\.18\.0\.2:8080\s+routed\s+0\s+0\s+-`, s)
	assert.Regexp(t, `172\.18\.0\.3:8080\s+routed\s+0\s+0\s+until `+until.Local().Format(time.TimeOnly)+` \(connect failed\)`, s)
	data, err := json.Marshal(view)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"ejected_until":"2026-12-02T12:04:31Z","eject_reason":"connect failed"`)
	assert.Equal(t, 1, strings.Count(string(data), "ejected_until"), "an admitted backend has no ejection fields")
}

// An edge whose container runs but whose admin address does not answer
// from here is not called "not running": the likely cause (rootless
// Docker, another network namespace) is named instead.
func TestEdgeStatus_RunningContainerWithoutAnswerNamesTheLikelyCause(t *testing.T) {
	view := system.EdgeView{Live: false, StatusWrittenAt: time.Now(), Container: &docker.Status{Name: docker.EdgeName, State: "running"}}
	var out bytes.Buffer
	require.NoError(t, renderEdgeStatus(&out, view))
	assert.Contains(t, out.String(), "its container runs, but its admin address does not answer from here (rootless Docker")
	assert.NotContains(t, out.String(), "edge: not running")

	view.Container.State = "exited"
	out.Reset()
	require.NoError(t, renderEdgeStatus(&out, view))
	assert.Contains(t, out.String(), "edge: not running (no answer on its admin address)")
}
