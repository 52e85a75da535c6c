package volxfer

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var when = time.Date(2024, 3, 4, 5, 6, 7, 0, time.UTC)

// tree makes a volume with a directory, files with odd modes and owners
// (owners only as root), a symlink and a hardlink.
func tree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) { t.Helper(); require.NoError(t, err) }
	must(os.Mkdir(filepath.Join(dir, "sub"), 0o750))
	must(os.WriteFile(filepath.Join(dir, "sub", "file"), []byte("hello volume"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600))
	must(os.WriteFile(filepath.Join(dir, "big"), bytes.Repeat([]byte("0123456789abcdef"), 200_000), 0o640))
	must(os.Link(filepath.Join(dir, "sub", "file"), filepath.Join(dir, "sub", "hard")))
	must(os.Symlink("sub/file", filepath.Join(dir, "link")))
	if os.Geteuid() == 0 {
		must(os.Chown(filepath.Join(dir, "sub"), 1234, 5678))
		must(os.Chown(filepath.Join(dir, "sub", "file"), 999, 70))
		must(os.Lchown(filepath.Join(dir, "link"), 7, 8))
	}
	must(os.Chmod(filepath.Join(dir, "sub", "file"), 0o751|os.ModeSetuid))
	must(os.Chmod(filepath.Join(dir, "sub"), 0o750|os.ModeSetgid))
	for _, p := range []string{"sub/file", "empty", "big", "sub"} {
		must(os.Chtimes(filepath.Join(dir, p), when, when.Add(500*time.Millisecond)))
	}
	return dir
}

type entry struct {
	Name, Link string
	Type       byte
	Mode       int64
	UID, GID   int
	Size       int64
	Mtime      time.Time
	Body       string
}

func listing(t *testing.T, b []byte) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		if len(body) > 32 {
			body = body[:32]
		}
		out = append(out, entry{h.Name, h.Linkname, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Size, h.ModTime.UTC(), string(body)})
	}
}

// The tar names entries relative to the volume, drops the root, keeps
// owners, modes (setuid, setgid), whole-second mtimes, the symlink's
// target, and stores the second name of a file as a hardlink.
func TestVolxfer_WriteTarIsTheEngineArchiveFormat(t *testing.T) {
	dir := tree(t)
	var b bytes.Buffer
	require.NoError(t, WriteTar(dir, &b))
	l := listing(t, b.Bytes())
	names := []string{}
	for _, e := range l {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"big", "empty", "link", "sub/", "sub/file", "sub/hard"}, names, "lexical walk order, the root dropped")
	byName := map[string]entry{}
	for _, e := range l {
		byName[e.Name] = e
	}
	assert.Equal(t, byte(tar.TypeDir), byName["sub/"].Type)
	assert.Equal(t, int64(0o2750), byName["sub/"].Mode&0o7777, "setgid kept")
	f := byName["sub/file"]
	assert.Equal(t, int64(0o4751), f.Mode&0o7777, "setuid kept")
	assert.Equal(t, when, f.Mtime, "whole seconds")
	assert.Equal(t, "hello volume", f.Body)
	assert.Equal(t, entry{Name: "sub/hard", Link: "sub/file", Type: tar.TypeLink, Mode: f.Mode, UID: f.UID, GID: f.GID, Mtime: f.Mtime}, byName["sub/hard"])
	assert.Equal(t, "sub/file", byName["link"].Link)
	assert.Equal(t, byte(tar.TypeSymlink), byName["link"].Type)
	if os.Geteuid() == 0 {
		assert.Equal(t, [2]int{1234, 5678}, [2]int{byName["sub/"].UID, byName["sub/"].GID})
		assert.Equal(t, [2]int{999, 70}, [2]int{f.UID, f.GID})
		assert.Equal(t, [2]int{7, 8}, [2]int{byName["link"].UID, byName["link"].GID})
	}
}

// pair runs one transfer: the listener here, the helper (Run) in a
// goroutine on dir, move on the accepted connection.
func pair(t *testing.T, mode byte, dir string, move func(*Conn) error) (moveErr, helperErr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := Listen("127.0.0.1", mode)
	require.NoError(t, err)
	defer ln.Close()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Config{Peer: ln.Addr(), Pin: ln.pin, Token: ln.token, Mode: mode, Dir: dir}) }()
	c, err := ln.Accept(ctx)
	require.NoError(t, err)
	moveErr = move(c)
	c.Close()
	return moveErr, <-done
}

// An export is the helper's tar, unchanged; a restore empties the volume
// (its entries) and leaves exactly the tar's tree, owners and modes.
func TestVolxfer_ExportThenRestoreRoundTrips(t *testing.T) {
	src := tree(t)
	var want bytes.Buffer
	require.NoError(t, WriteTar(src, &want))
	var got bytes.Buffer
	merr, herr := pair(t, ModeExport, src, func(c *Conn) error { return c.Receive(&got) })
	require.NoError(t, merr)
	require.NoError(t, herr)
	assert.Equal(t, want.Bytes(), got.Bytes())

	dst := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dst, "old", "deep"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dst, "sub"), []byte("a file where a dir comes"), 0o644))
	merr, herr = pair(t, ModeRestore, dst, func(c *Conn) error { return c.Send(bytes.NewReader(got.Bytes())) })
	require.NoError(t, merr)
	require.NoError(t, herr)
	var back bytes.Buffer
	require.NoError(t, WriteTar(dst, &back))
	assert.Equal(t, listing(t, want.Bytes()), listing(t, back.Bytes()))
}

// A connection with a wrong token (or mode) is closed and the listener
// goes on waiting; the helper refuses a manager whose certificate is not
// the pinned one.
func TestVolxfer_TokenAndPin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ln, err := Listen("127.0.0.1", ModeExport)
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan *Conn, 1)
	go func() { c, _ := ln.Accept(ctx); accepted <- c }()
	for _, hello := range []string{magic + "E" + strings.Repeat("0", tokenHex), magic + "R" + ln.token} {
		c, err := tls.Dial("tcp", ln.Addr(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test is the attacker
		require.NoError(t, err)
		_, err = c.Write([]byte(hello))
		require.NoError(t, err)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		assert.Error(t, err, "closed: %q", hello[:5])
		c.Close()
	}
	select {
	case <-accepted:
		t.Fatal("a bad hello was accepted")
	default:
	}

	dialFor = time.Second
	defer func() { dialFor = 30 * time.Second }()
	other, err := Listen("127.0.0.1", ModeExport)
	require.NoError(t, err)
	defer other.Close()
	err = Run(ctx, Config{Peer: ln.Addr(), Pin: other.pin, Token: ln.token, Mode: ModeExport, Dir: t.TempDir()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not match the pin")

	go func() {
		_ = Run(ctx, Config{Peer: ln.Addr(), Pin: ln.pin, Token: ln.token, Mode: ModeExport, Dir: t.TempDir()})
	}()
	c := <-accepted
	require.NotNil(t, c, "the good hello is accepted")
	var b bytes.Buffer
	require.NoError(t, c.Receive(&b))
	c.Close()
}

// frames is the wire form of data frames holding b, without an end.
func frames(b []byte) []byte {
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	_, _ = frameWriter{w: w}.Write(b)
	_ = w.Flush()
	return out.Bytes()
}

// A stream that stops before its end frame is ErrCut at any point (in a
// file's data, at an entry boundary), never a short tar; a peer's failure
// frame is its message.
func TestVolxfer_ACutStreamIsAnError(t *testing.T) {
	var tb bytes.Buffer
	require.NoError(t, WriteTar(tree(t), &tb))
	whole := tb.Bytes()
	for _, n := range []int{0, 512, 1024 + 100, len(whole) - 1024, len(whole)} {
		fr := &frameReader{r: bufio.NewReader(bytes.NewReader(frames(whole[:n])))}
		_, err := io.Copy(io.Discard, fr)
		assert.ErrorIs(t, err, ErrCut, "cut at %d", n)
		root, err := os.OpenRoot(t.TempDir())
		require.NoError(t, err)
		fr = &frameReader{r: bufio.NewReader(bytes.NewReader(frames(whole[:n])))}
		err = Extract(root, fr)
		if n == len(whole) {
			require.NoError(t, err, "the tar's own end marker arrived")
			_, err = io.Copy(io.Discard, fr) // restore reads on to the end frame
		}
		if n > 0 {
			assert.ErrorIs(t, err, ErrCut, "extract cut at %d", n)
		}
		root.Close()
	}
	var failed bytes.Buffer
	w := bufio.NewWriter(&failed)
	_ = frameWriter{w: w}.fail("disk full")
	err := readReply(bufio.NewReader(&failed))
	var pe *PeerError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "disk full", pe.Msg)
}

// The manager end of a cut export and of a cut restore: Receive and Send
// fail with ErrCut when the helper's connection ends early.
func TestVolxfer_ManagerSeesACutConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, mode := range []byte{ModeExport, ModeRestore} {
		ln, err := Listen("127.0.0.1", mode)
		require.NoError(t, err)
		go func() {
			c, err := tls.Dial("tcp", ln.Addr(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test is the helper
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(magic + string(mode) + ln.token))
			if mode == ModeExport {
				_, _ = c.Write(frames(bytes.Repeat([]byte{'x'}, 4096)))
			} else {
				_, _ = io.ReadFull(c, make([]byte, 1)) // the manager is sending
			}
			c.NetConn().Close() // the helper's process ends
		}()
		c, err := ln.Accept(ctx)
		require.NoError(t, err)
		if mode == ModeExport {
			err = c.Receive(io.Discard)
		} else {
			err = c.Send(io.MultiReader(bytes.NewReader(make([]byte, 1024)), endless{}))
		}
		assert.ErrorIs(t, err, ErrCut, "mode %c", mode)
		c.Close()
		ln.Close()
	}
}

// endless never ends (a restore still sending when the helper goes).
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func tarOf(t *testing.T, hs ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Linkname))
			body := h.Linkname
			h.Linkname = ""
			require.NoError(t, tw.WriteHeader(h))
			_, err := tw.Write([]byte(body))
			require.NoError(t, err)
			continue
		}
		require.NoError(t, tw.WriteHeader(h))
	}
	require.NoError(t, tw.Close())
	return b.Bytes()
}

// No entry is written outside the volume: ".." names, absolute names,
// paths through a symlink that leaves it, hardlinks to outside; device
// nodes are refused.
func TestVolxfer_ExtractStaysInsideTheVolume(t *testing.T) {
	outside := t.TempDir()
	cases := map[string][]*tar.Header{
		"dotdot":   {{Name: "../escaped", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "x"}},
		"absolute": {{Name: filepath.Join(outside, "escaped"), Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "x"}},
		"symlink dir": {{Name: "out", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "out/escaped", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "x"}},
		"symlink up": {{Name: "up", Typeflag: tar.TypeSymlink, Linkname: ".."},
			{Name: "up/escaped", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "x"}},
		"hardlink out": {{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}},
		"device":       {{Name: "null", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3}},
	}
	for name, hs := range cases {
		t.Run(name, func(t *testing.T) {
			vol := filepath.Join(t.TempDir(), "vol")
			require.NoError(t, os.Mkdir(vol, 0o755))
			root, err := os.OpenRoot(vol)
			require.NoError(t, err)
			defer root.Close()
			err = Extract(root, bytes.NewReader(tarOf(t, hs...)))
			require.Error(t, err)
			for _, p := range []string{filepath.Join(outside, "escaped"), filepath.Join(filepath.Dir(vol), "escaped")} {
				_, serr := os.Lstat(p)
				assert.True(t, os.IsNotExist(serr), "%s must not exist (%v)", p, err)
			}
		})
	}
}

func TestVolxfer_ConfigFromEnv(t *testing.T) {
	t.Setenv(EnvPeer, "10.0.0.5:4242")
	t.Setenv(EnvPin, strings.Repeat("ab", 32))
	t.Setenv(EnvToken, strings.Repeat("cd", 32))
	t.Setenv(EnvMode, "restore")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	assert.Equal(t, Config{Peer: "10.0.0.5:4242", Pin: strings.Repeat("ab", 32), Token: strings.Repeat("cd", 32), Mode: ModeRestore, Dir: MountPath}, c)
	t.Setenv(EnvMode, "copy")
	_, err = ConfigFromEnv()
	assert.ErrorContains(t, err, EnvMode)
	t.Setenv(EnvMode, "export")
	t.Setenv(EnvPin, "short")
	_, err = ConfigFromEnv()
	assert.ErrorContains(t, err, EnvPin)
}

// Accept ends with its context at once, even while a connection that
// never sends its hello is open.
func TestVolxfer_AcceptEndsWithItsContext(t *testing.T) {
	ln, err := Listen("127.0.0.1", ModeRestore)
	require.NoError(t, err)
	defer ln.Close()
	idle, err := net.Dial("tcp", ln.Addr())
	require.NoError(t, err)
	defer idle.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { cancel(errors.New("the helper task failed")) })
	t0 := time.Now()
	_, err = ln.Accept(ctx)
	assert.EqualError(t, err, "the helper task failed")
	assert.Less(t, time.Since(t0), 2*time.Second, "not the hello's 10 s")
}
