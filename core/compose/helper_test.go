package compose

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/composeapi"
)

// helperEnv makes this test binary the gordon-compose helper (Serve), so
// that composeapi.Exec runs the loader in another process as the
// installed docker-gordon does with cmd/gordon-compose.
const helperEnv = "GORDON_COMPOSE_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		if len(os.Args) != 2 || os.Args[1] != composeapi.HelperArg {
			fmt.Fprintln(os.Stderr, "helper run without", composeapi.HelperArg)
			os.Exit(2)
		}
		if err := Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// viaHelper loads req in a helper process (this test binary).
func viaHelper(t *testing.T, req composeapi.Request) (*Result, error) {
	t.Helper()
	t.Setenv(helperEnv, "1")
	exe, err := os.Executable()
	require.NoError(t, err)
	var stderr strings.Builder
	res, err := composeapi.Exec(context.Background(), exe, req, &stderr)
	t.Setenv(helperEnv, "")
	if stderr.Len() > 0 {
		t.Logf("helper stderr: %s", stderr.String())
	}
	return res, err
}

// requireSameLoad checks that the helper returns what the loader returns
// in process: the same manifest, spec (build contexts made absolute),
// source digest, files, notes and secrets (values read alike), or the same
// problems, or the same error message and kind.
func requireSameLoad(t *testing.T, req composeapi.Request) {
	t.Helper()
	want, wantErr := LoadRequest(context.Background(), req)
	got, gotErr := viaHelper(t, req)
	if wantErr != nil {
		require.Error(t, gotErr, "in process: %v", wantErr)
		require.Nil(t, got)
		assert.Equal(t, wantErr.Error(), gotErr.Error())
		assert.Equal(t, errors.Is(wantErr, core.ErrInvalid), errors.Is(gotErr, core.ErrInvalid))
		var we, ge *Error
		if errors.As(wantErr, &we) {
			require.ErrorAs(t, gotErr, &ge, "the project's problems come back as *Error")
			assert.Equal(t, we, ge)
		}
		return
	}
	require.NoError(t, gotErr)
	assert.Equal(t, string(want.Manifest), string(got.Manifest))
	assert.Equal(t, want.Spec, got.Spec)
	assert.Equal(t, want.Source, got.Source)
	assert.Equal(t, want.Files, got.Files)
	assert.Equal(t, want.WorkDir, got.WorkDir)
	assert.Equal(t, want.Notes, got.Notes)
	require.Len(t, got.Secrets, len(want.Secrets))
	for i, ws := range want.Secrets {
		gs := got.Secrets[i]
		assert.Equal(t, [4]string{ws.Service, ws.Name, ws.File, ws.Env}, [4]string{gs.Service, gs.Name, gs.File, gs.Env})
		wv, werr := ws.Value()
		gv, gerr := gs.Value()
		assert.Equal(t, string(wv), string(gv), "secret %s", ws.Name)
		assert.Equal(t, fmt.Sprint(werr), fmt.Sprint(gerr), "secret %s", ws.Name)
	}
}

// TestHelper_LoadsBundledProjectsAsInProcess: every bundled compose
// project (testdata/shop and the corpus, converted or refused) loads
// through the gordon-compose helper exactly as in process, with the
// operator's approved binds and with a remote engine's refusal.
func TestHelper_LoadsBundledProjectsAsInProcess(t *testing.T) {
	state := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(state, "config.toml"), []byte("[binds]\npublic = \""+filepath.Join(mustAbs(t, "testdata/corpus/static-bind"), "public")+"\"\n"), 0o600))
	dirs, err := filepath.Glob("testdata/corpus/*")
	require.NoError(t, err)
	dirs = append(dirs, "testdata/shop")
	for _, dir := range dirs {
		for _, binds := range []composeapi.BindPolicy{{StateDir: state}, {Refusal: "context prod is a remote engine"}} {
			t.Run(filepath.Base(dir)+"/"+fmt.Sprint(binds.Refusal != ""), func(t *testing.T) {
				requireSameLoad(t, composeapi.Request{Files: []string{filepath.Join(dir, "compose.yaml")}, Binds: binds})
			})
		}
	}
}

// TestHelper_FlagsSecretsAndErrorsAsInProcess: the compose flags (env
// file, profile, project name and directory, override file), an
// environment: secret set or not, and a project compose-go cannot load
// come back from the helper as in process.
func TestHelper_FlagsSecretsAndErrorsAsInProcess(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	base := write("compose.yaml", `services:
  web:
    image: shop-web:${WEB_TAG:-1.0}
    build: ./web
    secrets: [api_key, token]
  debug:
    image: shop-debug:1
    profiles: [debug]
secrets:
  api_key:
    file: ./api_key.txt
  token:
    environment: GORDON_HELPER_TEST_TOKEN
`)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "web"), 0o755))
	write("web/Dockerfile", "FROM scratch\n")
	override := write("compose.override.yaml", "services:\n  web:\n    environment:\n      MODE: ${MODE}\n")
	envFile := write("prod.env", "WEB_TAG=2.5\nMODE=prod\n")
	write("api_key.txt", "k3y-value")
	req := composeapi.Request{Files: []string{base, override}, EnvFiles: []string{envFile}, Profiles: []string{"debug"}, ProjectName: "shop", WorkDir: dir}

	t.Setenv("GORDON_HELPER_TEST_TOKEN", "t0k")
	requireSameLoad(t, req)
	os.Unsetenv("GORDON_HELPER_TEST_TOKEN")
	requireSameLoad(t, req)

	broken := write("broken.yaml", "services:\n  web:\n    image: [unclosed\n")
	requireSameLoad(t, composeapi.Request{Files: []string{broken}})
	requireSameLoad(t, composeapi.Request{Files: []string{filepath.Join(dir, "missing.yaml")}})
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	require.NoError(t, err)
	return a
}
