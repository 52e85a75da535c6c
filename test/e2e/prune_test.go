package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
)

type pruneReport struct {
	DryRun  bool `json:"dry_run"`
	Removed []struct{ Kind, App, Service, Name, Reason string }
	Kept    []struct{ Kind, App, Service, Name, Reason, Hint string }
}

func (p pruneReport) removed(kind string) []string {
	var out []string
	for _, it := range p.Removed {
		if it.Kind == kind {
			out = append(out, it.Name)
		}
	}
	return out
}

func builtTags(t *testing.T, app string) []string {
	t.Helper()
	out, err := exec.Command("docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "--filter", "reference=gordon/"+app+"-*").Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

func prune(t *testing.T, a *fixture.App, args ...string) pruneReport {
	t.Helper()
	r := a.Gordon(append([]string{"prune", a.Name, "--format", "json"}, args...)...)
	require.Equal(t, 0, r.Code, r.String())
	var rep pruneReport
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &rep), r.Stdout)
	return rep
}

// prune against the real engine: three context changes leave three older
// built images; prune --dry-run lists the ones beyond --keep and removes
// nothing; prune removes exactly those, keeps the serving image (and the
// rollback target with the default --keep 1), and the app keeps serving.
func TestPrune_BuiltImagesOfThreeContextChanges(t *testing.T) {
	removeBuiltImages(t, "e2eprune")
	a := fixture.NewApp(t, "e2eprune")
	app, edge := a.Name, a.Edge
	file, web := buildProject(t, app, "prune.test")
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		writeWebDockerfile(t, web, v, "")
		r := a.Gordon("deploy", "-f", file, "--quiet")
		require.Equal(t, 0, r.Code, r.String())
	}
	tags := builtTags(t, app)
	require.Len(t, tags, 4, "four builds: %v", tags)
	serving := fixture.Managed(t, app, "web")

	dry := prune(t, a, "--dry-run")
	assert.True(t, dry.DryRun)
	assert.Len(t, dry.removed("image"), 2, "the default --keep 1 keeps the rollback target: %+v", dry)
	all := prune(t, a, "--dry-run", "--keep", "0")
	require.Len(t, all.removed("image"), 3, "the images left by three context changes: %+v", all)
	require.ElementsMatch(t, tags, builtTags(t, app), "a dry run removes nothing")

	rep := prune(t, a, "--keep", "0")
	assert.Equal(t, all.removed("image"), rep.removed("image"), "the dry run listed exactly what prune removed")
	left := builtTags(t, app)
	require.Len(t, left, 1, "the serving image stays: %v", left)
	assert.NotContains(t, all.removed("image"), left[0])
	assert.Equal(t, serving, fixture.Managed(t, app, "web"), "no container was touched")
	code, body, err := edge.Get("prune.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	require.Equal(t, "v4", versionOf(body))

	again := prune(t, a)
	assert.Empty(t, again.Removed, "nothing left to remove: %+v", again)
}
