package edgeproxy_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// The hand-over thief: a process of another user that asks a running edge
// for its listeners ("take"), or listens on the hand-over socket before
// the next edge and offers it descriptors of its own ("squat"). These
// tests run it as uid 65534 and so need root.

const (
	thiefEnv      = "GORDON_TEST_HANDOVER_THIEF" // take | squat
	thiefAddrsEnv = "GORDON_TEST_HANDOVER_ADDRS" // addresses to try, one a line
	thiefOfferEnv = "GORDON_TEST_HANDOVER_OFFER" // squat: the address the offer names
	thiefUID      = 65534
)

// TestHandoverThiefProcess is the thief's body when the test binary runs
// as the thief (thiefEnv set); otherwise it does nothing.
func TestHandoverThiefProcess(t *testing.T) {
	mode := os.Getenv(thiefEnv)
	if mode == "" {
		t.Skip("runs only as the hand-over thief of another test")
	}
	addrs := strings.Split(os.Getenv(thiefAddrsEnv), "\n")
	switch mode {
	case "take":
		fmt.Println(thiefTake(addrs))
	case "squat":
		fmt.Println(thiefSquat(addrs[0], os.Getenv(thiefOfferEnv)))
	}
}

// thiefTake connects to the first address that answers, asks for the
// listeners and says how many descriptors it got ("stole N") or why none.
func thiefTake(addrs []string) string {
	var errs []string
	for _, a := range addrs {
		if len(a) >= 100 && !strings.HasPrefix(a, "@") {
			// Too long for an address: through a descriptor of its
			// directory, as the edge does.
			if d, err := os.Open(filepath.Dir(a)); err == nil {
				defer d.Close()
				a = fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(a))
			}
		}
		c, err := net.DialTimeout("unix", a, time.Second)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		uc := c.(*net.UnixConn)
		defer uc.Close()
		_ = uc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := uc.Write([]byte("take\n")); err != nil {
			return "got nothing: " + err.Error()
		}
		buf, oob := make([]byte, 64<<10), make([]byte, syscall.CmsgSpace(4*16))
		_, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
		if err != nil || oobn == 0 {
			return fmt.Sprintf("got nothing: %v", err)
		}
		msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
		n := 0
		for _, m := range msgs {
			fds, _ := syscall.ParseUnixRights(&m)
			n += len(fds)
		}
		return fmt.Sprintf("stole %d", n)
	}
	return "no connection: " + strings.Join(errs, "; ")
}

// thiefSquat listens on addr, holds a TCP listener of its own and offers
// it as the listener "http" bound at offerAddr to the edge that connects.
func thiefSquat(addr, offerAddr string) string {
	ln, err := net.Listen("unix", addr)
	if err != nil {
		return "cannot listen: " + err.Error()
	}
	defer ln.Close()
	own, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "cannot listen: " + err.Error()
	}
	f, _ := own.(*net.TCPListener).File()
	fmt.Println("listening")
	c, err := ln.Accept()
	if err != nil {
		return "accept: " + err.Error()
	}
	uc := c.(*net.UnixConn)
	defer uc.Close()
	_ = uc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(uc)
	if line, err := br.ReadString('\n'); err != nil || line != "take\n" {
		return fmt.Sprintf("no take: %q %v", line, err)
	}
	offer, _ := json.Marshal(map[string]any{"pid": os.Getpid(), "listeners": []map[string]string{{"name": "http", "addr": offerAddr}}})
	if _, _, err := uc.WriteMsgUnix(offer, syscall.UnixRights(int(f.Fd())), nil); err != nil {
		return "offer: " + err.Error()
	}
	line, err := br.ReadString('\n')
	return fmt.Sprintf("offered %s; the edge said %q (%v)", own.Addr(), line, err)
}

// startThief runs this test binary as the thief, as uid 65534, from a
// copy that user may execute; it returns the running command and its
// output's lines.
func startThief(t *testing.T, mode string, addrs []string, offer string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("running the thief as another user needs root")
	}
	dir, err := os.MkdirTemp("", "gordon-thief-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	self, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	bin := filepath.Join(dir, "thief")
	require.NoError(t, os.WriteFile(bin, self, 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestHandoverThiefProcess$")
	cmd.Dir = dir
	cmd.Env = []string{thiefEnv + "=" + mode, thiefAddrsEnv + "=" + strings.Join(addrs, "\n"), thiefOfferEnv + "=" + offer}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: thiefUID, Gid: thiefUID}}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// thiefSays returns the thief's first output line that starts with one of
// prefixes.
func thiefSays(t *testing.T, sc *bufio.Scanner, prefixes ...string) string {
	t.Helper()
	for sc.Scan() {
		for _, p := range prefixes {
			if strings.HasPrefix(sc.Text(), p) {
				return sc.Text()
			}
		}
	}
	t.Fatalf("the thief ended without saying %v: %v", prefixes, sc.Err())
	return ""
}

// openStateDir returns a new state directory that every user may reach
// (the worst case: a state directory left open to others), with
// <state>/edge writable by every user when writable is set.
func openStateDir(t *testing.T, name string, writable bool) string {
	t.Helper()
	base, err := os.MkdirTemp("", "gordon-handover-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	state := filepath.Join(base, name)
	require.NoError(t, os.MkdirAll(filepath.Join(state, "edge"), 0o755))
	require.NoError(t, os.Chmod(state, 0o755))
	if writable {
		require.NoError(t, os.Chmod(filepath.Join(state, "edge"), 0o777))
	}
	return state
}

// abstractHandoverName is the abstract name an edge once used for a
// state directory too long for a socket path.
func abstractHandoverName(state string) string {
	h := sha256.Sum256([]byte(filepath.Join(state, "edge", edgeproxy.HandoverFile)))
	return "@gordon-edge-handover-" + hex.EncodeToString(h[:8])
}

// R60: a state directory too long for a socket address still gets its
// hand-over socket as a file in <state>/edge, never an abstract name
// (which has no permissions), and the hand-over works through it.
func TestR60_LongStateDirHandoverSocketIsAFile(t *testing.T) {
	state := filepath.Join(t.TempDir(), strings.Repeat("s", 120))
	require.NoError(t, os.MkdirAll(state, 0o700))
	backend := nameBackend(t, "b")
	cfg := edgeproxy.Config{StateDir: state, HTTPAddr: freePort(t), PollInterval: 20 * time.Millisecond, ShutdownTimeout: time.Second}
	old, oldDone := runEdge(t, cfg)
	(&edge{srv: old, stateDir: state}).publish(t, httpTable(1, route("app.test", addrOf(backend))))

	fi, err := os.Lstat(filepath.Join(state, "edge", edgeproxy.HandoverFile))
	require.NoError(t, err, "the hand-over socket is a file in the state directory")
	assert.Equal(t, os.ModeSocket, fi.Mode().Type())
	unix, err := os.ReadFile("/proc/net/unix")
	require.NoError(t, err)
	assert.NotContains(t, string(unix), abstractHandoverName(state), "no abstract hand-over socket")

	next, _ := runEdge(t, cfg)
	assert.Equal(t, cfg.HTTPAddr, next.HTTPAddr())
	select {
	case err := <-oldDone:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the old edge did not stop after handing its listeners over")
	}
}

// R60: another user cannot take the edge's listeners, neither through a
// state directory too long for a socket path nor through a hand-over
// socket it can reach: it gets no descriptor and the edge keeps serving.
func TestR60_AnotherUserCannotTakeTheListeners(t *testing.T) {
	for _, tc := range []struct{ name, dir string }{
		{"long state directory", strings.Repeat("x", 90)},
		{"socket open to every user", "state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := openStateDir(t, tc.dir, false)
			backend := nameBackend(t, "edge")
			cfg := edgeproxy.Config{StateDir: state, HTTPAddr: freePort(t), PollInterval: 20 * time.Millisecond, ShutdownTimeout: time.Second}
			srv, done := runEdge(t, cfg)
			e := &edge{srv: srv, stateDir: state, client: &http.Client{Timeout: 3 * time.Second}}
			e.publish(t, httpTable(1, route("app.test", addrOf(backend))))
			sock := filepath.Join(state, "edge", edgeproxy.HandoverFile)
			require.NoError(t, os.Chmod(sock, 0o777)) // only the peer check stands in the way

			_, out := startThief(t, "take", []string{abstractHandoverName(state), sock}, "")
			said := thiefSays(t, out, "stole", "got nothing", "no connection")
			t.Logf("the thief: %s", said)
			assert.NotContains(t, said, "stole", "uid %d took listeners", thiefUID)

			select {
			case err := <-done:
				t.Fatalf("the edge stopped: %v", err)
			default:
			}
			code, body := e.get(t, "app.test", "/")
			assert.Equal(t, http.StatusOK, code)
			assert.Equal(t, "edge", body)
		})
	}
}

// R60: an edge takes no descriptors from a hand-over socket another user
// listens on: it binds its own listeners at the configured addresses.
func TestR60_EdgeRefusesListenersFromAnotherUser(t *testing.T) {
	state := openStateDir(t, "state", true)
	httpAddr := freePort(t)
	cmd, out := startThief(t, "squat", []string{filepath.Join(state, "edge", edgeproxy.HandoverFile)}, httpAddr)
	thiefSays(t, out, "listening", "cannot listen")

	srv, _ := runEdge(t, edgeproxy.Config{StateDir: state, HTTPAddr: httpAddr, PollInterval: 20 * time.Millisecond, ShutdownTimeout: time.Second})
	assert.Equal(t, httpAddr, srv.HTTPAddr(), "the edge serves its own listener, not the one uid %d offered", thiefUID)
	_ = cmd.Process.Kill()
}
