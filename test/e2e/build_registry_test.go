package e2e

import (
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
)

// Image builds: with registry = "host[:port]/prefix" the built image
// is tagged under the registry, pushed there with the client's
// credentials (docker login; the registry requires them), and the
// service runs it by digest.
func TestImageBuild_PushesToTheManifestRegistry(t *testing.T) {
	rg := startRegistry(t)
	rg.login(t)
	reg := rg.Addr
	// Registered before NewApp, so it runs after the app's containers
	// are removed (an image in use would only be untagged).
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "image", "ls", "-q", "--filter", "reference="+reg+"/e2e/*").Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "image", "rm", "-f", id).Run()
		}
	})
	a := fixture.NewApp(t, "e2ebuildreg")
	_, web := buildProject(t, a.Name, "buildreg.test")
	a.File = filepath.Join(filepath.Dir(web), "app.toml")
	m := strings.Replace(webManifest(a.Name, "unused", "buildreg.test", "[services.web.build]\ncontext = \"web\"\n"), "image = \"unused\"\n", "", 1)
	m = strings.Replace(m, "\n[services.web]", "\nregistry = \""+reg+"/e2e\"\n[services.web]", 1)
	a.Write(m)

	_, r := fixture.DeployJSON(t, a.State, a.File)
	require.Equal(t, 0, r.Code, r.String())
	pushed := regexp.MustCompile(regexp.QuoteMeta(reg) + `/e2e/e2ebuildreg-web:([0-9a-f]{16})@sha256:[0-9a-f]{64}`).FindStringSubmatch(r.Stderr)
	require.NotNil(t, pushed, "the push is named: %s", r.Stderr)
	req, err := http.NewRequest("GET", "http://"+reg+"/v2/e2e/e2ebuildreg-web/tags/list", nil)
	require.NoError(t, err)
	req.SetBasicAuth(rg.User, rg.Password)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Contains(t, string(body), pushed[1], "the registry has the tag")
	digest := pushed[0][strings.Index(pushed[0], "@")+1:]
	assert.Contains(t, r.Stdout, digest, "the service runs the pushed image by digest")
	code, answer, err := a.Edge.Get("buildreg.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, answer)
	assert.Equal(t, "v1", versionOf(answer))
}
