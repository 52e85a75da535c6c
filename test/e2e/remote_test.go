package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// remoteCmd builds `docker --context CTX gordon ARGS`, with the client's
// own state directory set (it must stay free of app state).
func remoteCmd(ctx context.Context, dockerCtx, clientState string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, "docker", append([]string{"--context", dockerCtx, "gordon"}, args...)...)
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+fixture.DockerConfig(), "GORDON_STATE_DIR="+clientState, "PATH="+fixture.BinDir()+":"+os.Getenv("PATH"))
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, &so, &se
}

func remote(t testing.TB, dockerCtx, clientState string, args ...string) fixture.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd, so, se := remoteCmd(ctx, dockerCtx, clientState, args...)
	t0 := time.Now()
	err := cmd.Run()
	r := fixture.Result{Stdout: so.String(), Stderr: se.String(), Elapsed: time.Since(t0)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case err != nil:
		r.Code = -1
		r.Stderr += "\n" + err.Error()
	}
	return r
}

// Remote engines: edge start puts the edge on the context's engine; a
// deploy without --copy-images is refused naming the image and the flag; a
// deploy with it runs the app there (not on the local engine), served
// through that edge; the journal lives in the server's state directory, not
// the client's; status through the context shows the app and the local
// engine's does not; two redeploys and a Ctrl-C'd deploy followed by
// reconcile, under load, lose no request and leave one container.
func TestRemote_DeployThroughContextWithCopyImages(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	v2 := testimages.Require(t, "v2", "httpd")["httpd"]
	e := startEngine2(t)
	client := t.TempDir()
	app, host := "e2eremote", "remote.test"
	fixture.CleanupApp(t, app)
	httpAddr, adminAddr := fixture.FreeAddr(t), fixture.FreeAddr(t)

	r := remote(t, e.Context, client, "--state-dir", client, "status")
	require.Equal(t, 1, r.Code, r.String())
	assert.Contains(t, r.Stderr, "lives on that engine's machine")

	file := filepath.Join(t.TempDir(), "app.toml")
	fixture.WriteFile(t, file, webManifest(app, v1, host, ""))
	r = remote(t, e.Context, client, "deploy", "-f", file)
	require.Equal(t, 1, r.Code, r.String())
	assert.Contains(t, r.Stderr, v1)
	assert.Contains(t, r.Stderr, "--copy-images")
	assert.Empty(t, e.managed(t, app), "a refused deploy changes nothing")

	// A fresh server: the first deploy says to start the system containers.
	r = remote(t, e.Context, client, "deploy", "-f", file, "--copy-images")
	require.Equal(t, 1, r.Code, r.String())
	assert.Contains(t, r.Stderr, "docker --context "+e.Context+" gordon system start")
	assert.Empty(t, e.managed(t, app))

	r = remote(t, e.Context, client, "edge", "start", "--http-addr", httpAddr, "--admin-addr", adminAddr)
	require.Equal(t, 0, r.Code, r.String())
	first, _, _ := strings.Cut(r.Stderr, "\n")
	assert.Equal(t, fmt.Sprintf("engine: context %s (%s, remote)", e.Context, e.TCP), first, "the first progress line names the engine")
	edgeOn2, err := e.docker("ps", "-q", "--filter", "name=^gordon-edge$")
	require.NoError(t, err)
	require.NotEmpty(t, edgeOn2, "the edge runs on the second engine")

	t0 := time.Now()
	r = remote(t, e.Context, client, "deploy", "-f", file, "--copy-images")
	require.Equal(t, 0, r.Code, r.String())
	t.Logf("first remote deploy with --copy-images: %s\n%s", time.Since(t0).Round(time.Millisecond), r.Stderr)
	require.Len(t, e.managed(t, app), 1, "the app runs on the second engine")
	assert.Empty(t, fixture.Managed(t, app, ""), "and not on the local engine")

	edge := &fixture.Edge{HTTPAddr: httpAddr}
	code, body, err := edge.Get(host, "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	assert.Equal(t, "v1", versionOf(body))

	_, err = os.Stat(filepath.Join(client, "apps"))
	assert.True(t, os.IsNotExist(err), "the client's state directory holds no app state (%v)", err)
	_, err = os.Stat(filepath.Join(e.StateDir, "apps", app, "active.json"))
	assert.NoError(t, err, "the journal is next to the engine")

	r = remote(t, e.Context, client, "status", "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var st []struct {
		App string `json:"app"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &st), r.Stdout)
	require.Len(t, st, 1)
	assert.Equal(t, app, st[0].App)
	lr := fixture.Gordon(t, client, "status", "--format", "json")
	require.Equal(t, 0, lr.Code, lr.String())
	assert.NotContains(t, lr.Stdout, app, "the local engine's status does not show the remote app")

	// A compose project (two files, an env file, a file: secret) through
	// the context: validate and the dry run here, then the deploy runs
	// the converted manifest there and stores the secret there.
	cdir := t.TempDir()
	capp := "e2eremotec"
	fixture.WriteFile(t, filepath.Join(cdir, "compose.yaml"), fmt.Sprintf(`name: %s
services:
  web:
    image: %s
    secrets: [api_key]
    healthcheck:
      test: ["CMD", "/httpd", "-get", "http://127.0.0.1:8080/healthz"]
      interval: 1s
      timeout: 2s
      retries: 5
    stop_grace_period: 2s
    x-gordon:
      host: remotec.test
      port: 8080
secrets:
  api_key:
    file: ./api_key.txt
`, capp, v1))
	fixture.WriteFile(t, filepath.Join(cdir, "compose.override.yaml"), "services:\n  web:\n    environment:\n      GREETING: ${GREETING}\n")
	fixture.WriteFile(t, filepath.Join(cdir, "prod.env"), "GREETING=from-env-file\n")
	fixture.WriteFile(t, filepath.Join(cdir, "api_key.txt"), "compose-k3y")
	cargs := []string{"-f", filepath.Join(cdir, "compose.yaml"), "-f", filepath.Join(cdir, "compose.override.yaml"), "--env-file", filepath.Join(cdir, "prod.env")}
	r = remote(t, e.Context, client, append([]string{"validate"}, cargs...)...)
	require.Equal(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stdout, "ok (compose project, app "+capp+", 1 service(s))")
	r = remote(t, e.Context, client, append([]string{"deploy", "--dry-run"}, cargs...)...)
	require.Equal(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stdout, "web")
	assert.Empty(t, e.managed(t, capp), "a dry run changes nothing")
	r = remote(t, e.Context, client, append([]string{"deploy", "--copy-images"}, cargs...)...)
	require.Equal(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stderr, "secret api_key of web stored from compose (11 bytes)")
	assert.NotContains(t, r.Stderr+r.Stdout, "compose-k3y")
	require.Len(t, e.managed(t, capp), 1, "the compose app runs on the second engine")
	code, body, err = edge.Get("remotec.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	assert.True(t, strings.HasPrefix(body, "from-env-file: version=v1"), "the override's value from the env file: %q", body)
	cvals, _ := filepath.Glob(filepath.Join(e.StateDir, "secrets", "*", "web", "api_key"))
	require.Len(t, cvals, 1, "the secret is in the server's store")
	got, err := os.ReadFile(cvals[0])
	require.NoError(t, err)
	assert.Equal(t, "compose-k3y", string(got))
	r = remote(t, e.Context, client, "remove", capp)
	require.Equal(t, 0, r.Code, r.String())

	// secrets set sends its stdin; the value lands in the server's state.
	sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
	defer scancel()
	scmd, sso, sse := remoteCmd(sctx, e.Context, client, "secrets", "set", app, "web", "token")
	scmd.Stdin = strings.NewReader("s3cret-value\n")
	require.NoError(t, scmd.Run(), "%s%s", sso, sse)
	vals, _ := filepath.Glob(filepath.Join(e.StateDir, "secrets", "*", "web", "token"))
	require.Len(t, vals, 1)
	got, err = os.ReadFile(vals[0])
	require.NoError(t, err)
	assert.Equal(t, "s3cret-value", string(got))

	// A static custom plugin from --plugin-dir is sent and runs there.
	pdir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(probePlugins(t), "gordon-probe-exec"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(pdir, "gordon-probe-exec"), data, 0o755))
	r = remote(t, e.Context, client, "--plugin-dir", pdir, "plugins", "ls")
	require.Equal(t, 0, r.Code, r.String())
	assert.Regexp(t, `probe\s+exec\s+/tmp/gordon-in/plugins/gordon-probe-exec\s+1\s+ok`, r.Stdout)

	// Redeploys under load, then a Ctrl-C'd one and reconcile.
	load := fixture.StartLoad(t, "http://"+httpAddr+"/", host, 4, instanceOf)
	for _, img := range []string{v2, v1} {
		fixture.WriteFile(t, file, webManifest(app, img, host, ""))
		r = remote(t, e.Context, client, "deploy", "-f", file, "--copy-images")
		require.Equal(t, 0, r.Code, r.String())
	}
	fixture.WriteFile(t, file, webManifest(app, v2, host, "[services.web.env]\nREADY_AFTER = \"5s\"\n"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, so, se := remoteCmd(ctx, e.Context, client, "deploy", "-f", file)
	require.NoError(t, cmd.Start())
	assert.Eventually(t, func() bool { return len(e.managed(t, app)) >= 2 }, 30*time.Second, 100*time.Millisecond, "the candidate is created")
	// The candidate is listed before its create call returns: give the
	// deploy time to journal it and reach readiness (READY_AFTER 5s). A
	// sleep: the remote CLI reports no event between the create and the
	// readiness wait, and the journal is on the other engine.
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT), "Ctrl-C to the CLI's process group")
	err = cmd.Wait()
	t.Logf("Ctrl-C'd remote deploy: %v\nstdout:\n%s\nstderr:\n%s", err, so, se)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "an interrupted deploy does not report success")
	assert.Equal(t, 130, ee.ExitCode(), "the remote verb's exit status comes back: interrupted (decision 5)")
	assert.Contains(t, so.String(), ": failed", "and so does its result")
	r = remote(t, e.Context, client, "reconcile", app)
	require.Equal(t, 0, r.Code, r.String())

	// A lost connection (the CLI killed outright): the runner's stdin
	// closes, the remote verb stops and journals its end.
	fixture.WriteFile(t, file, webManifest(app, v1, host, "[services.web.env]\nREADY_AFTER = \"5s\"\n"))
	cmd, _, _ = remoteCmd(ctx, e.Context, client, "deploy", "-f", file)
	require.NoError(t, cmd.Start())
	assert.Eventually(t, func() bool { return len(e.managed(t, app)) >= 2 }, 30*time.Second, 100*time.Millisecond, "the candidate is created")
	// The candidate is listed before its create call returns: give the
	// deploy time to journal it and reach readiness (READY_AFTER 5s). A
	// sleep: the remote CLI reports no event between the create and the
	// readiness wait, and the journal is on the other engine.
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
	_ = cmd.Wait()
	require.Eventually(t, func() bool {
		out, _ := e.docker("ps", "-aq", "--filter", "label=dev.gordon.role=runner")
		return out == ""
	}, 20*time.Second, 200*time.Millisecond, "the runner ends with its client")
	r = remote(t, e.Context, client, "ops", app, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var ops []struct {
		Outcome string `json:"outcome"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &ops), r.Stdout)
	require.NotEmpty(t, ops)
	t.Logf("ops after the killed deploy: %s", r.Stdout)
	for i, op := range ops {
		assert.NotEmpty(t, op.Outcome, "op %d is finalized, not left running unjournaled", i)
	}
	r = remote(t, e.Context, client, "reconcile", app)
	require.Equal(t, 0, r.Code, r.String())
	waitMoreAnswers(t, load.Snapshot, 100)
	stats := load.Stop()
	t.Logf("load: %s", stats)
	assert.Zero(t, stats.Transport+stats.Non2xx, "no request lost: %s", stats)
	assert.Positive(t, stats.Answered)
	require.Eventually(t, func() bool { return len(e.managed(t, app)) == 1 }, 20*time.Second, 200*time.Millisecond, "one container left")

	// What the runner adds (reported, not asserted): the same unchanged
	// deploy and status, through the context (runner) and through the
	// engine's unix socket with the same state directory (local).
	viaSocket := func(args ...string) fixture.Result {
		cmd := exec.Command("docker", append([]string{"gordon", "--state-dir", e.StateDir}, args...)...)
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+fixture.DockerConfig(), "DOCKER_HOST=unix://"+e.Sock, "PATH="+fixture.BinDir()+":"+os.Getenv("PATH"))
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return fixture.Result{Elapsed: time.Since(t0)}
	}
	for _, args := range [][]string{{"deploy", "-f", file}, {"status", app}} {
		var rem, loc []time.Duration
		for range 3 {
			r := remote(t, e.Context, client, args...)
			require.Equal(t, 0, r.Code, r.String())
			rem = append(rem, r.Elapsed)
			loc = append(loc, viaSocket(args...).Elapsed)
		}
		t.Logf("%s: remote (runner) %v, local (same engine and state) %v", args[0], rem, loc)
	}
}

// registry is a test-owned Debian docker-registry on 127.0.0.1 with
// htpasswd (bcrypt) auth; the engines treat 127.0.0.0/8 registries as
// insecure (plain HTTP) by default.
type registry struct {
	Addr, User, Password string
}

func startRegistry(t *testing.T) registry {
	t.Helper()
	if _, err := exec.LookPath("docker-registry"); err != nil {
		t.Skip("docker-registry not installed (apt-get install docker-registry apache2-utils; .ci/run does)")
	}
	dir := t.TempDir()
	r := registry{Addr: fixture.FreeAddr(t), User: "deployer", Password: "pw-" + filepath.Base(dir)}
	out, err := exec.Command("htpasswd", "-Bbn", r.User, r.Password).Output()
	require.NoError(t, err)
	fixture.WriteFile(t, filepath.Join(dir, "htpasswd"), string(out))
	fixture.WriteFile(t, filepath.Join(dir, "config.yml"), fmt.Sprintf(`version: 0.1
storage:
  filesystem:
    rootdirectory: %s/data
http:
  addr: %s
auth:
  htpasswd:
    realm: gordon-e2e
    path: %s/htpasswd
`, dir, r.Addr, dir))
	cmd := exec.Command("docker-registry", "serve", filepath.Join(dir, "config.yml"))
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + r.Addr + "/v2/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized
	}, 10*time.Second, 100*time.Millisecond, "registry on %s", r.Addr)
	return r
}

// login runs docker login for the registry in the test's DOCKER_CONFIG
// (logout at the end of the test).
func (r registry) login(t *testing.T) {
	t.Helper()
	cmd := exec.Command("docker", "--config", fixture.DockerConfig(), "login", r.Addr, "-u", r.User, "--password-stdin")
	cmd.Stdin = strings.NewReader(r.Password)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command("docker", "--config", fixture.DockerConfig(), "logout", r.Addr).Run() })
}

// SPEC R13, S26: a private image deploys (here through a remote engine's
// runner) with the CLI's own registry credentials, fails with a message
// that says to log in without them, and neither the password nor the
// encoded credentials are written anywhere in the server's state. The
// image is also on this machine's engine: the server pulls it all the same
// (--copy-images is only suggested when that pull fails).
func TestRemote_PrivateRegistryPullWithDockerLogin(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	reg := startRegistry(t)
	e := startEngine2(t)
	client := t.TempDir()
	app, host := "e2eprivreg", "privreg.test"
	fixture.CleanupApp(t, app)

	// Push the test image to the registry (login in a private config).
	private := reg.Addr + "/gordon/httpd:private"
	pushCfg := t.TempDir()
	login := exec.Command("docker", "--config", pushCfg, "login", reg.Addr, "-u", reg.User, "--password-stdin")
	login.Stdin = strings.NewReader(reg.Password)
	out, err := login.CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command("docker", "tag", v1, private).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command("docker", "--config", pushCfg, "push", private).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", private).Run() })

	httpAddr, adminAddr := fixture.FreeAddr(t), fixture.FreeAddr(t)
	r := remote(t, e.Context, client, "edge", "start", "--http-addr", httpAddr, "--admin-addr", adminAddr)
	require.Equal(t, 0, r.Code, r.String())
	file := filepath.Join(t.TempDir(), "app.toml")
	fixture.WriteFile(t, file, webManifest(app, private, host, ""))

	r = remote(t, e.Context, client, "deploy", "-f", file)
	require.Equal(t, 1, r.Code, r.String())
	t.Logf("deploy without a login:\n%s", r.Stderr)
	assert.Contains(t, r.Stderr, "docker login "+reg.Addr, "without a login the error says to log in")
	assert.Contains(t, r.Stderr, "--copy-images", "the pull failed: sending this machine's copy is the other way")
	assert.Empty(t, e.managed(t, app))

	reg.login(t)
	r = remote(t, e.Context, client, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stderr, "pulled on "+e.Context, "the server pulled the image the client's engine also has")
	code, body, err := (&fixture.Edge{HTTPAddr: httpAddr}).Get(host, "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	assert.Equal(t, "v1", versionOf(body))

	// The password, and the auth the CLI sent, appear nowhere in the state.
	encoded := base64.StdEncoding.EncodeToString([]byte(reg.User + ":" + reg.Password))
	files := 0
	for _, root := range []string{e.StateDir, client} {
		require.NoError(t, filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil || !fi.Mode().IsRegular() {
				return err
			}
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			assert.NotContains(t, string(data), reg.Password, "password in %s", p)
			assert.NotContains(t, string(data), encoded, "credentials in %s", p)
			files++
			return nil
		}))
	}
	assert.Greater(t, files, 5, "the server's journal was searched")
	_, _ = e.docker("rmi", "-f", private)

	// The same pull on the local engine (the runtime plugin resolves the
	// CLI's credentials itself).
	local := t.TempDir()
	fixture.StartEdge(t, local)
	lapp := app + "local"
	fixture.CleanupApp(t, lapp)
	fixture.WriteFile(t, file, webManifest(lapp, private, "local."+host, ""))
	_ = exec.Command("docker", "rmi", private).Run() // the tag only; v1 keeps the image
	require.Error(t, exec.Command("docker", "image", "inspect", private).Run(), "the local engine lacks the private image before the deploy")
	lr := fixture.Gordon(t, local, "deploy", "-f", file)
	require.Equal(t, 0, lr.Code, lr.String())
	// The pull happens in the checks before the revision is stored (R12),
	// so it has no progress line of its own: the image is simply there.
	require.NoError(t, exec.Command("docker", "image", "inspect", private).Run(), "the image was pulled with the CLI's credentials")
	require.Len(t, fixture.Managed(t, lapp, "web"), 1)
}

// sshEndpoint is a test-owned sshd on a loopback port (its own config, host
// key and authorized key), in front of this machine's own engine, and a
// PATH shim so the docker CLI's ssh:// helper runs ssh with the test's
// client config (key, known_hosts with the host key: strict checking).
type sshEndpoint struct {
	Host    string // ssh://root@127.0.0.1:PORT
	PathDir string // put first on PATH
}

func startSSHD(t *testing.T) sshEndpoint {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		sshd = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(sshd); err != nil {
		t.Skip("openssh-server not installed (.ci/run installs it)")
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("openssh-client not installed (.ci/run installs it)")
	}
	dir := t.TempDir()
	for _, k := range []string{"host", "client"} {
		out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	addr := fixture.FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	pub, err := os.ReadFile(filepath.Join(dir, "client.pub"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600))
	hostPub, err := os.ReadFile(filepath.Join(dir, "host.pub"))
	require.NoError(t, err)
	hostKey := strings.Join(strings.Fields(string(hostPub))[:2], " ")
	fixture.WriteFile(t, filepath.Join(dir, "known_hosts"), fmt.Sprintf("[127.0.0.1]:%s %s\n", port, hostKey))
	fixture.WriteFile(t, filepath.Join(dir, "sshd_config"), fmt.Sprintf(`Port %s
ListenAddress 127.0.0.1
HostKey %s/host
AuthorizedKeysFile %s/authorized_keys
PidFile %s/sshd.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
`, port, dir, dir, dir))
	fixture.WriteFile(t, filepath.Join(dir, "ssh_config"), fmt.Sprintf(`Host 127.0.0.1
  IdentityFile %s/client
  IdentitiesOnly yes
  UserKnownHostsFile %s/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
`, dir, dir))
	shim := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(shim, 0o755))
	sshBin, _ := exec.LookPath("ssh")
	require.NoError(t, os.WriteFile(filepath.Join(shim, "ssh"), []byte(fmt.Sprintf("#!/bin/sh\nexec %s -F %s/ssh_config \"$@\"\n", sshBin, dir)), 0o755))
	_ = os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation directory
	cmd := exec.Command(sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	logf, err := os.Create(filepath.Join(dir, "sshd.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("sshd log:\n%s", fixture.LastLines(string(b), 20))
		}
	})
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "sshd on %s", addr)
	return sshEndpoint{Host: "ssh://root@" + addr, PathDir: shim}
}

// ssh:// works too: against this machine's own engine through a local
// sshd, a deploy runs in the runner container reached over ssh and status
// reads it back. The server's state directory is the test's (the shared
// engine cannot be relabelled: GORDON_REMOTE_STATE_DIR); the edge of that
// state directory runs in the foreground here, which is "the server".
func TestRemote_SSHContextDeployAndStatus(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	ep := startSSHD(t)
	server := t.TempDir()
	edge := fixture.StartEdge(t, server)
	client := t.TempDir()
	app, host := "e2eremotessh", "remotessh.test"
	fixture.CleanupApp(t, app)
	ctxName := "gordon-e2e-ssh-" + filepath.Base(server)
	out, err := exec.Command("docker", "--config", fixture.DockerConfig(), "context", "create", ctxName, "--docker", "host="+ep.Host).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() {
		_ = exec.Command("docker", "--config", fixture.DockerConfig(), "context", "rm", "-f", ctxName).Run()
	})

	run := func(args ...string) fixture.Result {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd, so, se := remoteCmd(ctx, ctxName, client, args...)
		cmd.Env = append(cmd.Env, "PATH="+ep.PathDir+":"+fixture.BinDir()+":"+os.Getenv("PATH"), "GORDON_REMOTE_STATE_DIR="+server)
		t0 := time.Now()
		err := cmd.Run()
		r := fixture.Result{Stdout: so.String(), Stderr: se.String(), Elapsed: time.Since(t0)}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.Code = ee.ExitCode()
		} else if err != nil {
			r.Code = -1
		}
		return r
	}
	file := filepath.Join(t.TempDir(), "app.toml")
	fixture.WriteFile(t, file, webManifest(app, v1, host, ""))
	r := run("deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	first, _, _ := strings.Cut(r.Stderr, "\n")
	assert.Equal(t, fmt.Sprintf("engine: context %s (%s, remote)", ctxName, ep.Host), first)
	t.Logf("ssh deploy: %s", r.Elapsed.Round(time.Millisecond))
	code, body, err := edge.Get(host, "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)

	r = run("status", app, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var st []struct {
		App      string `json:"app"`
		Services []struct {
			Container string `json:"container"`
		} `json:"services"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &st), r.Stdout)
	require.Len(t, st, 1)
	require.Len(t, st[0].Services, 1)
	assert.Equal(t, fixture.Managed(t, app, "web"), []string{st[0].Services[0].Container})
	_, err = os.Stat(filepath.Join(server, "apps", app, "active.json"))
	assert.NoError(t, err, "the journal is in the server's state directory")
	_, err = os.Stat(filepath.Join(client, "apps"))
	assert.True(t, os.IsNotExist(err), "and not the client's")
}
