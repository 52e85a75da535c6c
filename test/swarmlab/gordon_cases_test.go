package swarmlab

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tcpToUnix forwards a loopback TCP port to the unix socket of host
// ("unix:///…"): a docker context at tcp://127.0.0.1:PORT is a remote
// engine to docker gordon, which then runs the verb in a runner there.
func tcpToUnix(t *testing.T, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	sock := strings.TrimPrefix(host, "unix://")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("unix", sock)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return ln.Addr().String()
}

// remoteDeploy deploys through `docker --context mgr gordon` where mgr is
// tcp://127.0.0.1:PORT forwarded to the manager: the verb runs in a runner
// on the manager, on the edge overlay, with the manager's state.
func (g *gordonLab) remoteDeploy(ctx context.Context, t *testing.T) {
	addr := tcpToUnix(t, g.Nodes[0].Host)
	plugins := filepath.Join(g.home, "cli-plugins")
	require.NoError(t, os.MkdirAll(plugins, 0o755))
	_ = os.Symlink(filepath.Join(g.bin, "docker-gordon"), filepath.Join(plugins, "docker-gordon"))
	env := append(os.Environ(), "DOCKER_CONFIG="+g.home, "GORDON_STATE_DIR="+t.TempDir(), "GORDON_REMOTE_STATE_DIR="+g.state,
		"PATH="+g.bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "docker", args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("context", "create", "mgr", "--docker", "host=tcp://"+addr)
	require.NoError(t, err, out)
	out, err = run("--context", "mgr", "gordon", "deploy", "-f", writeManifest(t, webManifest(g.httpd, "v3")))
	require.NoError(t, err, out)
	t.Logf("remote deploy:\n%s", out)
	assert.Contains(t, out, "context mgr (tcp://"+addr+", remote)")
	g.answersEverywhere(ctx, t, "web.lab", "version=v3")
}

// volumeService deploys a volume-backed service twice: both generations
// run on the same node, never two at once, the data written through the
// first is read through the second, and no request fails meanwhile (the
// edge holds them during the sequential replacement).
func (g *gordonLab) volumeService(ctx context.Context, t *testing.T) {
	g.must(ctx, t, "deploy", "-f", writeManifest(t, kvManifest(g.kv, "v1")))
	first, err := g.tasksOf(ctx, "kv", "kv")
	require.NoError(t, err)
	require.Len(t, first, 1, "one running instance: %v", first)
	_, err = g.InLab(ctx, "curl", "-sf", "--max-time", "3", "-X", "PUT", "--data", "kept", "-H", "Host: kv.lab", "http://"+g.Nodes[0].IP+"/k/greeting")
	require.NoError(t, err)

	var most atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if nodes, err := g.tasksOf(ctx, "kv", "kv"); err == nil && int64(len(nodes)) > most.Load() {
				most.Store(int64(len(nodes)))
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	load := startLabLoad(t, g.Lab, "http://"+g.Nodes[1].IP+"/k/greeting", "kv.lab", 4, 5*time.Minute)
	load.awaitOK(t, 50, 30*time.Second)
	r := g.must(ctx, t, "deploy", "-f", writeManifest(t, kvManifest(g.kv, "v2")))
	t.Logf("sequential deploy:\n%s", r.err)
	load.awaitOK(t, 50, 30*time.Second)
	st := load.Stop()
	close(stop)
	wg.Wait()
	t.Logf("load during the sequential deploy: %d OK, %d failed, longest gap %v, errors %v", st.OK, st.Failed(), st.LongestGap, st.Errors)
	assert.Zero(t, st.Failed(), "requests are held, none fails: %v", st.Errors)
	assert.LessOrEqual(t, most.Load(), int64(1), "never two running instances of a single-writer service")
	second, err := g.tasksOf(ctx, "kv", "kv")
	require.NoError(t, err)
	assert.Equal(t, first, second, "the new generation runs on the first one's node")
	out, err := g.InLab(ctx, "curl", "-sf", "--max-time", "3", "-H", "Host: kv.lab", "http://"+g.Nodes[2].IP+"/k/greeting")
	require.NoError(t, err)
	assert.Equal(t, "kept", out, "the volume's data is there")
}

// nodeLoss kills a worker that runs replicas of web while a load runs
// through the manager's edge.
func (g *gordonLab) nodeLoss(ctx context.Context, t *testing.T) {
	nodes, err := g.tasksOf(ctx, "web", "web")
	require.NoError(t, err)
	victim := 0
	for i := len(g.Nodes); i >= 2 && victim == 0; i-- {
		for _, n := range nodes {
			if n == g.Nodes[i-1].Name {
				victim = i
			}
		}
	}
	require.NotZero(t, victim, "a worker runs a replica: %v", nodes)
	name := g.Nodes[victim-1].Name
	load := startLabLoad(t, g.Lab, "http://"+g.Nodes[0].IP+"/", "web.lab", 8, 5*time.Minute)
	load.awaitOK(t, 200, 30*time.Second)
	t0 := time.Now()
	require.NoError(t, g.KillNode(victim))
	var back []string
	require.Eventually(t, func() bool {
		back = nil
		nodes, err := g.tasksOf(ctx, "web", "web")
		if err != nil {
			return false
		}
		for _, n := range nodes {
			if n != name {
				back = append(back, n)
			}
		}
		return len(back) >= 3
	}, 60*time.Second, 250*time.Millisecond, "3 replicas run on the other nodes within 60 s (last: %v)", back)
	t.Logf("node %s killed: 3 replicas running on %v after %v", name, back, time.Since(t0).Round(time.Millisecond))
	// The reconcile loop routes the rescheduled replicas: the load keeps
	// being answered after that.
	load.awaitOK(t, 500, 30*time.Second)
	st := load.Stop()
	t.Logf("load while %s died: %d OK, %d failed, p99 %v, max %v, longest gap %v, errors %v", name, st.OK, st.Failed(), st.P99, st.Max, st.LongestGap, st.Errors)
	assert.Zero(t, st.Failed(), "no request fails when a node dies: %v", st.Errors)
	r := g.must(ctx, t, "status")
	t.Logf("status after the node loss:\n%s", r.out)
	assert.Contains(t, r.out, "runtime: swarm, 3 nodes (2 ready)")
	assert.Contains(t, r.out, name+" down")
	for _, line := range strings.Split(r.out, "\n") {
		if strings.HasPrefix(line, "web ") {
			assert.NotContains(t, line, "on "+name, "no web instance runs on the lost node")
		}
	}
}

// killEdges kills the edge task's container on every node at once (an
// edge crash everywhere, or a whole-cluster restart of the edge): Swarm
// starts new tasks, which have no route table and whose peers have none.
func (g *gordonLab) killEdges(ctx context.Context, t *testing.T) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range g.Nodes {
		ids, err := g.Docker(ctx, i+1, "ps", "-q", "--filter", "label=com.docker.swarm.service.name=gordon-edge")
		require.NoError(t, err)
		require.NotEmpty(t, ids, "an edge container runs on %s", g.Nodes[i].Name)
		wg.Go(func() { _, _ = g.Docker(ctx, i+1, append([]string{"kill"}, strings.Fields(ids)...)...) })
	}
	wg.Wait()
}

// tcpBind deploys an app whose TCP bind is on a port the edge does not
// publish (refused: nothing stored, no service), publishes the port with
// system start --tcp-ports (Swarm replaces each node's edge task; web
// still answers everywhere after it), then deploys the app: it answers
// through the edge of every node; the port is remembered.
func (g *gordonLab) tcpBind(ctx context.Context, t *testing.T) {
	manifest := writeManifest(t, tcpManifest(g.httpd, "0.0.0.0:9000"))
	r := g.gordon(ctx, "deploy", "-f", manifest)
	require.Equal(t, 1, r.code, "refused:\n%s", r)
	t.Logf("refusal:\n%s", r.err)
	assert.Contains(t, r.err, "the swarm edge does not publish port 9000")
	assert.Contains(t, r.err, "docker gordon system start --tcp-ports 9000`")
	_, err := os.Stat(filepath.Join(g.state, "apps", "tcp", "revisions"))
	assert.True(t, os.IsNotExist(err), "no revision stored: %v", err)
	out, err := g.Docker(ctx, 1, "service", "ls", "-q", "--filter", "label=dev.gordon.app=tcp")
	require.NoError(t, err)
	assert.Empty(t, out, "no service created")

	s0 := time.Now()
	r = g.must(ctx, t, "system", "start", "--tcp-ports", "9000")
	t.Logf("system start --tcp-ports 9000 in %v:\n%s", time.Since(s0).Round(time.Millisecond), r)
	assert.Contains(t, r.out, "global service updated (HTTP :80, TCP :9000 on every edge node")
	assert.Contains(t, r.out, "Swarm replaces the edge task of each node once")
	assert.Contains(t, r.out, "running on 3 node(s)")
	g.answersEverywhere(ctx, t, "web.lab", "version=v2")

	d0 := time.Now()
	r = g.must(ctx, t, "deploy", "-f", manifest)
	t.Logf("TCP deploy in %v:\n%s", time.Since(d0).Round(time.Millisecond), r.out)
	for _, n := range g.Nodes {
		out, err := g.InLab(ctx, "curl", "-sf", "--max-time", "3", "http://"+n.IP+":9000/")
		require.NoError(t, err, "the TCP bind answers through the edge on %s", n.Name)
		assert.Contains(t, out, "version=tcp", "the edge on %s relays to the app", n.Name)
	}
	r = g.must(ctx, t, "system", "start")
	assert.Contains(t, r.out, "global service already running (HTTP :80, TCP :9000", "the TCP ports are remembered")
	r = g.must(ctx, t, "system", "status")
	assert.Contains(t, r.out, "publishing HTTP :80, TCP :9000")
}
