package engine_test

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
)

// TestLogs_StreamsActiveContainers: lines of every ACTIVE container with
// their service; a service the app does not have → not found, naming its
// services; unknown app → not found.
func TestLogs_StreamsActiveContainers(t *testing.T) {
	h := coretest.NewEngine(t)
	api := core.ServiceSpec{Name: "api", Image: "registry.example/api:1"}
	web := coretest.WebSpec(0)
	h.SeedServing("blog", coretest.BlogApp(api, web), map[string]string{"api": "c-api", "web": "c-web"},
		map[string]map[int]int{"web": {8080: 17000}})
	h.Runtime.LogsFor("c-api", "api up")
	h.Runtime.LogsFor("c-web", "web 1", "web 2", "web 3")

	var got []string
	err := h.Engine.Logs(h.Ctx(), "blog", "", core.LogOptions{Tail: 2}, func(s string, l core.LogLine) error {
		got = append(got, s+": "+l.Text)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"api: api up", "web: web 2", "web: web 3"}, got)

	got = nil
	err = h.Engine.Logs(h.Ctx(), "blog", "", core.LogOptions{Follow: true}, func(s string, l core.LogLine) error {
		got = append(got, s+": "+l.Text)
		return nil
	})
	require.NoError(t, err)
	sort.Strings(got)
	assert.Equal(t, []string{"api: api up", "web: web 1", "web: web 2", "web: web 3"}, got)

	err = h.Engine.Logs(h.Ctx(), "blog", "db", core.LogOptions{}, func(string, core.LogLine) error { return nil })
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), `app blog has no service "db" (its services: api, web)`)
	err = h.Engine.Logs(h.Ctx(), "nope", "", core.LogOptions{}, func(string, core.LogLine) error { return nil })
	assert.ErrorIs(t, err, core.ErrNotFound)
}
