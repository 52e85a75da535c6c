package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/cli/cli/command"
	configtypes "github.com/docker/cli/cli/config/types"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/compose"
	"github.com/gordon-deploy/docker-gordon/core/manifest"
	"github.com/gordon-deploy/docker-gordon/system/remote"
)

// The runner's command line is rebuilt from what cobra parsed: the verb
// path below the gordon root (also under the docker CLI's root), every set
// flag (repeatable ones once per value), consumed flags dropped, rewrites
// added, positional arguments last (after -- when one looks like a flag).
func TestRemote_RunnerArgsFromParsedFlags(t *testing.T) {
	docker := &cobra.Command{Use: "docker"}
	root := &cobra.Command{Use: "gordon"}
	root.PersistentFlags().String("state-dir", "", "")
	root.PersistentFlags().Bool("debug", false, "")
	deploy := &cobra.Command{Use: "deploy", RunE: func(*cobra.Command, []string) error { return nil }}
	deploy.Flags().StringArrayP("file", "f", nil, "")
	deploy.Flags().StringArray("service", nil, "")
	deploy.Flags().Bool("copy-images", false, "")
	deploy.Flags().String("format", "", "")
	root.AddCommand(deploy)
	docker.AddCommand(root)

	docker.SetArgs([]string{"gordon", "--debug", "deploy", "-f", "/home/me/app.toml", "--service", "web", "--service", "db", "--copy-images", "--format=json", "--state-dir", "/x"})
	var got *cobra.Command
	var gotArgs []string
	deploy.RunE = func(c *cobra.Command, a []string) error { got, gotArgs = c, a; return nil }
	require.NoError(t, docker.Execute())
	assert.Equal(t, []string{"deploy"}, verbPath(got))
	args := remote.RunnerArgs(verbPath(got), got.Flags(), gotArgs, map[string]bool{"file": true, "copy-images": true, "state-dir": true}, []string{"--file=/tmp/gordon-in/manifest/app.toml"})
	assert.Equal(t, []string{"gordon", "deploy", "--debug=true", "--format=json", "--service=web", "--service=db", "--file=/tmp/gordon-in/manifest/app.toml"}, args)

	assert.Equal(t, []string{"gordon", "deploy", "--debug=true", "--file=/home/me/app.toml", "--format=json", "--service=web", "--service=db"},
		remote.RunnerArgs(verbPath(got), got.Flags(), gotArgs, map[string]bool{"copy-images": true, "state-dir": true}, nil), "a repeatable -f is passed once per value")

	status := &cobra.Command{Use: "status", Run: func(*cobra.Command, []string) {}}
	root.AddCommand(status)
	assert.Equal(t, []string{"gordon", "status", "--", "-odd"}, remote.RunnerArgs(verbPath(status), status.Flags(), []string{"-odd"}, nil, nil))
	assert.True(t, localOnly(root), "the root (help) runs here")
	version := &cobra.Command{Use: "version"}
	root.AddCommand(version)
	assert.True(t, localOnly(version))
	assert.False(t, localOnly(status))
}

// Every verb that reads an app's input has the input flags with the types
// the remote deploy reads them with (a string lookup of the repeatable -f
// fails, and would send no manifest).
func TestRemote_InputFlagsReadFromEveryInputVerb(t *testing.T) {
	env := &cliEnv{}
	for _, cmd := range []*cobra.Command{newDeployCommand(env), newValidateCommand(env), newConvertCommand(env)} {
		require.NoError(t, cmd.ParseFlags([]string{"-f", "a.yaml", "-f", "b.yaml", "--env-file", "x.env", "--profile", "p1", "-p", "shop", "--project-directory", "/d"}), cmd.Name())
		o, err := inputOptionsFromFlags(cmd.Flags())
		require.NoError(t, err, cmd.Name())
		assert.Equal(t, inputOptions{files: []string{"a.yaml", "b.yaml"}, envFiles: []string{"x.env"}, profiles: []string{"p1"}, projectName: "shop", projectDir: "/d"}, o, cmd.Name())
		for _, name := range inputFlagNames {
			assert.NotNil(t, cmd.Flags().Lookup(name), "%s --%s", cmd.Name(), name)
		}
	}
	_, err := inputOptionsFromFlags((&cobra.Command{Use: "x"}).Flags())
	assert.Error(t, err, "a verb without the input flags is an error, not an empty input")
}

// remoteDeployCall parses argv with the real deploy command under a gordon
// root (as the docker CLI runs it) and prepares it for a runner of a remote
// engine, as runRemote does; stderr is what the client printed.
func remoteDeployCall(t *testing.T, argv ...string) (remote.Call, string, error) {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Setenv("COMPOSE_PROFILES", "")
	var stderr bytes.Buffer
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))), command.WithOutputStream(io.Discard), command.WithErrorStream(&stderr))
	require.NoError(t, err)
	env := &cliEnv{dockerCli: dcli, logger: hclog.NewNullLogger(),
		target: remote.Target{Context: "prod", Host: "tcp://vps.example:2376", Remote: true}}
	env.opts.stateDir = t.TempDir()
	root := &cobra.Command{Use: "gordon", SilenceErrors: true, SilenceUsage: true}
	root.PersistentFlags().StringVar(&env.opts.stateDir, "state-dir", env.opts.stateDir, "")
	root.PersistentFlags().StringArrayVar(&env.opts.pluginDirs, "plugin-dir", nil, "")
	deploy := newDeployCommand(env)
	var rc remote.Call
	var perr error
	deploy.RunE = func(cmd *cobra.Command, args []string) error {
		rc, perr = prepareBundle(context.Background(), cmd, env, args, remote.ServerPaths{Arch: "x86_64"})
		return nil
	}
	root.AddCommand(deploy)
	root.SetArgs(argv)
	require.NoError(t, root.Execute())
	return rc, stderr.String(), perr
}

// A remote deploy -f of a TOML manifest sends that file as is and gives the
// runner one --file at its path; -f is the repeatable input flag, so the
// manifest is found through it (not through a string flag lookup that
// fails and sends nothing); the images to check or copy are the manifest's.
func TestRemote_DeployBundleOfTOMLManifest(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "blog.toml")
	data := []byte("name = \"blog\"\n\n[services.web]\nimage = \"blog-web:2\"\n\n[services.worker]\nimage = \"blog-worker:2\"\n")
	require.NoError(t, os.WriteFile(file, data, 0o644))

	rc, _, err := remoteDeployCall(t, "deploy", "-f", file, "--service", "web", "--copy-images", "--pull=never")
	require.NoError(t, err)
	assert.Equal(t, []string{"gordon", "deploy", "--pull=never", "--service=web", "--file=/tmp/gordon-in/manifest/blog.toml"}, rc.Args)
	require.Len(t, rc.Bundle.Files, 1, "the manifest is sent")
	assert.Equal(t, remote.File{Path: "manifest/blog.toml", Mode: 0o600, Data: data}, rc.Bundle.Files[0])
	assert.Equal(t, []string{"blog-web:2", "blog-worker:2"}, rc.Images)
	assert.True(t, rc.ShipImages)
	assert.True(t, rc.CopyImages)
	assert.Empty(t, rc.Bundle.Secrets)

	rc, _, err = remoteDeployCall(t, "deploy", "-f", file, "--dry-run")
	require.NoError(t, err)
	assert.Equal(t, []string{"gordon", "deploy", "--dry-run=true", "--file=/tmp/gordon-in/manifest/blog.toml"}, rc.Args)
	assert.False(t, rc.ShipImages, "a dry run checks no image on the engine")

	// A manifest with problems is refused here, as a local deploy does.
	require.NoError(t, os.WriteFile(file, []byte("name = \"blog\"\n[services.web]\n"), 0o644))
	_, stderr, err := remoteDeployCall(t, "deploy", "-f", file)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nothing was changed")
	assert.Contains(t, stderr, "image")

	_, _, err = remoteDeployCall(t, "deploy", "blog", "--copy-images")
	assert.ErrorIs(t, err, errNoCopyWithoutFile)
}

// A remote deploy of a compose project (two files, an env file, a profile,
// a project name and directory, a file: secret) is loaded here and sent as
// ONE manifest, the converted one; the compose flags stay here, the runner
// gets one --file; the secret's value travels in memory (no bundle file
// holds it) and a dry run reads no secret.
func TestRemote_DeployBundleOfComposeProject(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	base := write("compose.yaml", `services:
  web:
    image: shop-web:${WEB_TAG:-1.0}
    secrets: [api_key]
  debug:
    image: shop-debug:1
    profiles: [debug]
secrets:
  api_key:
    file: ./api_key.txt
`)
	override := write("compose.override.yaml", "services:\n  web:\n    environment:\n      MODE: ${MODE}\n")
	envFile := write("prod.env", "WEB_TAG=2.5\nMODE=prod\n")
	write("api_key.txt", "k3y-value")

	argv := []string{"deploy", "-f", base, "-f", override, "--env-file", envFile, "--profile", "debug", "-p", "shop", "--project-directory", dir, "--op-key", "k1"}
	rc, _, err := remoteDeployCall(t, argv...)
	require.NoError(t, err)
	assert.Equal(t, []string{"gordon", "deploy", "--op-key=k1", "--file=/tmp/gordon-in/manifest/shop.toml"}, rc.Args)

	want, err := compose.Load(context.Background(), compose.Options{Files: []string{base, override}, EnvFiles: []string{envFile}, Profiles: []string{"debug"}, ProjectName: "shop", WorkDir: dir})
	require.NoError(t, err)
	require.Len(t, rc.Bundle.Files, 1, "one manifest, not the compose files")
	assert.Equal(t, "manifest/shop.toml", rc.Bundle.Files[0].Path)
	assert.Equal(t, want.Manifest, rc.Bundle.Files[0].Data, "the converted manifest, as convert prints it")
	spec, err := manifest.Parse("sent", rc.Bundle.Files[0].Data)
	require.NoError(t, err)
	assert.Equal(t, "shop", spec.Name)
	require.Len(t, spec.Services, 2, "the debug profile is on")
	assert.Equal(t, []string{"shop-debug:1", "shop-web:2.5"}, rc.Images, "the env file's tag")
	assert.Equal(t, "prod", spec.Services[1].Env["MODE"])

	assert.Equal(t, []remote.SecretValue{{Service: "web", Name: "api_key", Value: []byte("k3y-value")}}, rc.Bundle.Secrets)
	for _, f := range rc.Bundle.Files {
		assert.NotContains(t, string(f.Data), "k3y-value", "a secret value is never a bundle file")
	}

	rc, _, err = remoteDeployCall(t, append(argv, "--dry-run")...)
	require.NoError(t, err)
	assert.Empty(t, rc.Bundle.Secrets, "a dry run stores no secret, so it reads none")
	assert.False(t, rc.ShipImages)

	// A secret file that cannot be read stops the deploy here.
	require.NoError(t, os.Remove(filepath.Join(dir, "api_key.txt")))
	_, _, err = remoteDeployCall(t, argv...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "secret api_key of service web")
	assert.NotContains(t, err.Error(), "k3y-value")
}

// A compose bind cannot be checked against a remote engine's approved
// binds (they are on that machine): it is refused with what to do.
func TestRemote_ComposeBindRefusedForRemoteEngine(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "compose.yaml")
	require.NoError(t, os.WriteFile(file, []byte("name: site\nservices:\n  web:\n    image: site:1\n    volumes:\n      - /srv/site:/data\n"), 0o600))
	rc, stderr, err := remoteDeployCall(t, "deploy", "-f", file)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nothing was changed")
	assert.Contains(t, stderr, "is a remote engine")
	assert.Contains(t, stderr, "[[services.NAME.bind]]")
	assert.Empty(t, rc.Bundle.Files)
}

// The runner stores the secrets the CLI sent under the app lock, in the
// server's secret store.
func TestRemote_RunnerStoresSentSecrets(t *testing.T) {
	var stderr bytes.Buffer
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))), command.WithOutputStream(io.Discard), command.WithErrorStream(&stderr))
	require.NoError(t, err)
	env := &cliEnv{dockerCli: dcli, logger: hclog.NewNullLogger()}
	env.opts.stateDir = t.TempDir()
	require.NoError(t, storeSecretValues(context.Background(), env, "shop", []remote.SecretValue{{Service: "web", Name: "api_key", Value: []byte("k3y-value")}}))
	store, err := env.openStore()
	require.NoError(t, err)
	got, err := store.GetSecret(context.Background(), "shop", "web", "api_key")
	require.NoError(t, err)
	assert.Equal(t, "k3y-value", string(got))
	assert.NotContains(t, stderr.String(), "k3y-value")
	assert.Contains(t, stderr.String(), "secret api_key of web stored from compose (9 bytes)")
}

// For a remote engine deploy and validate refuse every compose bind (the
// approved ones are on that machine); convert resolves against the local
// state directory; a runner's engine is local.
func TestRemote_BindPolicyByVerbAndEngine(t *testing.T) {
	state := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(state, "config.toml"), []byte("[binds]\nsite = \"/srv/site\"\n"), 0o600))
	env := &cliEnv{target: remote.Target{Context: "prod", Host: "tcp://vps.example:2376", Remote: true}}
	env.opts.stateDir = state
	for _, verb := range []string{"deploy", "validate"} {
		_, err := env.bindPolicy(verb).Name("/srv/site")
		assert.ErrorContains(t, err, "context prod (tcp://vps.example:2376, remote) is a remote engine", verb)
	}
	name, err := env.bindPolicy("convert").Name("/srv/site")
	require.NoError(t, err)
	assert.Equal(t, "site", name)

	env.target = remote.Target{Context: "default", Host: "unix:///var/run/docker.sock"}
	name, err = env.bindPolicy("deploy").Name("/srv/site")
	require.NoError(t, err)
	assert.Equal(t, "site", name)
}

// On a swarm's state directory `system start` runs in the runner and
// pushes the edge image to --registry, so the runner gets the client's
// registry credentials (docker login), as the verbs that pull do.
func TestRemote_SystemStartBundleCarriesRegistryCredentials(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))), command.WithOutputStream(io.Discard), command.WithErrorStream(io.Discard))
	require.NoError(t, err)
	// docker login reg.lab:5000 (the CLI caches its config directory per
	// process, so the login is added to the loaded file, not written).
	dcli.ConfigFile().AuthConfigs["reg.lab:5000"] = configtypes.AuthConfig{ServerAddress: "reg.lab:5000", Username: "u", Password: "p"}
	env := &cliEnv{dockerCli: dcli, logger: hclog.NewNullLogger(),
		target: remote.Target{Context: "default", Host: "unix:///var/run/docker.sock"}}
	env.opts.stateDir = t.TempDir()
	root := &cobra.Command{Use: "gordon", SilenceErrors: true, SilenceUsage: true}
	root.PersistentFlags().StringVar(&env.opts.stateDir, "state-dir", env.opts.stateDir, "")
	root.PersistentFlags().StringArrayVar(&env.opts.pluginDirs, "plugin-dir", nil, "")
	system := &cobra.Command{Use: "system"}
	start := newSystemStartCommand(env)
	var rc remote.Call
	var perr error
	start.RunE = func(cmd *cobra.Command, args []string) error {
		rc, perr = prepareBundle(context.Background(), cmd, env, args, remote.ServerPaths{Arch: "x86_64"})
		return nil
	}
	system.AddCommand(start)
	root.AddCommand(system)
	root.SetArgs([]string{"system", "start", "--registry", "reg.lab:5000", "--http-addr", ":80"})
	require.NoError(t, root.Execute())
	require.NoError(t, perr)
	assert.NotEmpty(t, rc.Bundle.RegistryAuth["reg.lab:5000"], "the runner gets the credentials for --registry")
}

// TestBuild_RemoteBundleNamesTheImageOnly: a remote deploy -f of a
// manifest with a build sends the runner a manifest that names the
// build's tag and has no build table (its args stay here); --build and
// --no-build are consumed here. A dry run builds nothing.
func TestBuild_RemoteBundleNamesTheImageOnly(t *testing.T) {
	dir := writeTree(t, map[string]string{"web/Dockerfile": "FROM scratch\n"})
	file := filepath.Join(dir, "blog.toml")
	require.NoError(t, os.WriteFile(file, []byte("name = \"blog\"\n[services.web.build]\ncontext = \"web\"\nargs = { TOKEN = \"s3cret\" }\n"), 0o644))
	rc, _, err := remoteDeployCall(t, "deploy", "-f", file, "--dry-run", "--build")
	require.NoError(t, err)
	assert.Equal(t, []string{"gordon", "deploy", "--dry-run=true", "--file=/tmp/gordon-in/manifest/blog.toml"}, rc.Args)
	require.Len(t, rc.Bundle.Files, 1)
	sent := string(rc.Bundle.Files[0].Data)
	assert.NotContains(t, sent, "s3cret")
	assert.NotContains(t, sent, "build")
	assert.Regexp(t, `image = 'gordon/blog-web:[0-9a-f]{16}'`, sent)
	assert.Len(t, rc.Images, 1)
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

// remoteVerbCall parses argv with the real command under a gordon root (as
// the docker CLI runs it) and prepares it for a runner of a remote engine,
// as runRemote does.
func remoteVerbCall(t *testing.T, parent string, cmd func(*cliEnv) *cobra.Command, argv ...string) (remote.Call, error) {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	var stderr bytes.Buffer
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))), command.WithOutputStream(io.Discard), command.WithErrorStream(&stderr))
	require.NoError(t, err)
	env := &cliEnv{dockerCli: dcli, logger: hclog.NewNullLogger(),
		target: remote.Target{Context: "prod", Host: "tcp://vps.example:2376", Remote: true}}
	env.opts.stateDir = t.TempDir()
	root := &cobra.Command{Use: "gordon", SilenceErrors: true, SilenceUsage: true}
	root.PersistentFlags().StringVar(&env.opts.stateDir, "state-dir", env.opts.stateDir, "")
	p := &cobra.Command{Use: parent}
	root.AddCommand(p)
	c := cmd(env)
	var rc remote.Call
	var perr error
	c.RunE = func(cmd *cobra.Command, args []string) error {
		rc, perr = prepareBundle(context.Background(), cmd, env, args, remote.ServerPaths{Arch: "x86_64"})
		return nil
	}
	p.AddCommand(c)
	root.SetArgs(argv)
	require.NoError(t, root.Execute())
	return rc, perr
}

// A remote edge start --acme-ca-root FILE and certs add --cert/--key read
// the files on the client and ship them to the runner like the other
// inputs: the runner's flags name its copies, never the client's paths; a
// missing file is refused on the client.
func TestRemote_FilesNamedByFlagsAreReadOnTheClient(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "pebble.minica.pem")
	require.NoError(t, os.WriteFile(root, []byte("root-pem"), 0o644))
	edgeStart := func(env *cliEnv) *cobra.Command { return newEdgeContainerCommands(env)[0] }
	rc, err := remoteVerbCall(t, "edge", edgeStart, "edge", "start", "--https-addr", ":443", "--acme-ca-root", root)
	require.NoError(t, err)
	assert.Contains(t, rc.Args, "--acme-ca-root=/tmp/gordon-in/flagfiles/acme-ca-root/pebble.minica.pem")
	assert.NotContains(t, strings.Join(rc.Args, " "), dir, "the client's path is not sent")
	assert.Contains(t, rc.Bundle.Files, remote.File{Path: "flagfiles/acme-ca-root/pebble.minica.pem", Mode: 0o600, Data: []byte("root-pem")})

	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	require.NoError(t, os.WriteFile(cert, []byte("cert-pem"), 0o644))
	require.NoError(t, os.WriteFile(key, []byte("key-pem"), 0o600))
	rc, err = remoteVerbCall(t, "certs", newCertsAddCommand, "certs", "add", "blog.example.com", "--cert", cert, "--key", key)
	require.NoError(t, err)
	assert.Contains(t, rc.Args, "--cert=/tmp/gordon-in/flagfiles/cert/c.pem")
	assert.Contains(t, rc.Args, "--key=/tmp/gordon-in/flagfiles/key/k.pem")
	assert.Contains(t, rc.Bundle.Files, remote.File{Path: "flagfiles/key/k.pem", Mode: 0o600, Data: []byte("key-pem")})

	_, err = remoteVerbCall(t, "edge", edgeStart, "edge", "start", "--acme-ca-root", filepath.Join(dir, "missing.pem"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--acme-ca-root")
	assert.Contains(t, err.Error(), "nothing was changed")
}
