package engine_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

// configSpec is a web service that receives one project file.
func configSpec(content string) core.ServiceSpec {
	s := coretest.WebSpec(0)
	sum := sha256.Sum256([]byte(content))
	s.Configs = []core.ConfigFile{{Source: "nginx.conf", Path: "/etc/nginx/nginx.conf", Mode: manifest.ConfigModeFile,
		Digest: hex.EncodeToString(sum[:]), Data: []byte(content)}}
	return s
}

// deployConfig submits and deploys the app with content as its project
// file and returns the service's result.
func deployConfig(t *testing.T, h *coretest.Harness, content string) engine.ServiceResult {
	t.Helper()
	app := coretest.BlogApp(configSpec(content))
	_, err := h.Engine.SubmitRevision(h.Ctx(), app, "sha-"+content)
	require.NoError(t, err)
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	require.Len(t, res.Services, 1)
	return res.Services[0]
}

// R82: a project file is stored by its content before the revision, never
// journaled in it, and bind-mounted read-only at its path from the stored
// copy; the same file again replaces nothing, a changed file replaces the
// service and mounts the new copy.
func TestR82_ProjectFileShippedByContent(t *testing.T) {
	h := coretest.NewEngine(t)
	first := deployConfig(t, h, "worker_processes 1;")
	require.Equal(t, engine.ResultDeployed, first.Result)
	name := configSpec("worker_processes 1;").Configs[0].StoreName()
	data, ok := h.Store.File("blog", name)
	require.True(t, ok, "stored by content before the revision")
	require.Equal(t, "worker_processes 1;", string(data))

	id, err := h.Store.LoadDesired(h.Ctx(), "blog")
	require.NoError(t, err)
	rev, err := h.Store.LoadRevision(h.Ctx(), "blog", id)
	require.NoError(t, err)
	require.Equal(t, name, rev.Spec.Services[0].Configs[0].StoreName(), "the revision names the file by its digest")
	raw, err := json.Marshal(rev)
	require.NoError(t, err)
	require.NotContains(t, string(raw), hex.EncodeToString([]byte("worker_processes")), "content never journaled")
	require.NotContains(t, string(raw), "d29ya2VyX3Byb2Nlc3Nlcy", "content never journaled (base64)")

	created := h.Runtime.Created()
	require.Len(t, created, 1)
	require.Contains(t, created[0].Mounts, core.Mount{Type: core.MountBind, Source: "/mem/files/blog/" + name,
		Target: "/etc/nginx/nginx.conf", ReadOnly: true, Config: name})

	again := deployConfig(t, h, "worker_processes 1;")
	require.Equal(t, engine.ResultUnchanged, again.Result, "an unchanged file replaces nothing")
	require.Len(t, h.Runtime.Created(), 1, "no container created")

	changed := deployConfig(t, h, "worker_processes 2;")
	require.Equal(t, engine.ResultDeployed, changed.Result, "a changed file replaces the service")
	require.Equal(t, engine.FlowOverlap, changed.Flow, "a project file is read-only: the service still overlaps")
	created = h.Runtime.Created()
	require.Len(t, created, 2)
	newName := configSpec("worker_processes 2;").Configs[0].StoreName()
	require.NotEqual(t, name, newName)
	require.Contains(t, created[1].Mounts, core.Mount{Type: core.MountBind, Source: "/mem/files/blog/" + newName,
		Target: "/etc/nginx/nginx.conf", ReadOnly: true, Config: newName})
}

// R82: a revision whose project file is no longer stored (a state
// directory restored without its files) is refused before anything is
// touched, saying to deploy the project again.
func TestR82_MissingStoredFileRefusedInPreflight(t *testing.T) {
	h := coretest.NewEngine(t)
	app := coretest.BlogApp(configSpec("a"))
	app.Services[0].Configs[0].Data = nil // as read back from a revision
	_, err := h.Engine.SubmitRevision(h.Ctx(), app, "sha-a")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.ErrorIs(t, err, core.ErrNotFound)
	require.ErrorContains(t, err, "deploy -f")
	require.Empty(t, h.Runtime.Created())
}

// A service's placement constraints reach the runtime on every instance
// (the placement label, one a line); a runtime with one node ignores it.
func TestPlacement_ConstraintsReachTheRuntime(t *testing.T) {
	h := coretest.NewEngine(t)
	s := coretest.WebSpec(0)
	s.Placement = []string{"node.role==worker", "node.labels.zone!=b"}
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(s), "sha-p")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	created := h.Runtime.Created()
	require.Len(t, created, 1)
	require.Equal(t, "node.role==worker\nnode.labels.zone!=b", created[0].Labels[core.LabelPlacement])
}
