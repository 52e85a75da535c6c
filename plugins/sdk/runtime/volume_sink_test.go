package runtime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"

	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// payloadArchiver writes payload to w in one call.
type payloadArchiver struct{ payload []byte }

func (a payloadArchiver) ExportVolume(_ context.Context, _, _ string, w io.Writer) error {
	_, err := w.Write(a.payload)
	return err
}
func (payloadArchiver) RestoreVolume(context.Context, string, io.Reader) error { return nil }

// sentStream is the plugin side of an ExportVolume call: it keeps what is
// sent.
type sentStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent []*pb.VolumeChunk
}

func (s *sentStream) Context() context.Context { return s.ctx }
func (s *sentStream) Send(m *pb.VolumeChunk) error {
	s.sent = append(s.sent, m)
	return nil
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13 + i>>10)
	}
	return b
}

// The tar goes through the socket, not in messages: the call sends one
// message with no data and the tar's length; a connection without the
// token is closed and does not take the sink.
func TestSnapshot_TheTarTakesTheSocketAndAStrangerIsRefused(t *testing.T) {
	sk, err := openSink()
	require.NoError(t, err)
	var out bytes.Buffer
	go sk.serve(&out, func() { t.Error("aborted") })
	defer sk.close()
	info, err := os.Stat(sk.dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "the socket's directory is private")

	stranger, err := net.Dial("unix", sk.path())
	require.NoError(t, err)
	_, _ = stranger.Write(bytes.Repeat([]byte{'x'}, sinkTokenLen))
	_ = stranger.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = stranger.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "a connection with a wrong token is closed")
	stranger.Close()

	payload := pattern(3<<20 + 5)
	st := &sentStream{ctx: context.Background()}
	ok, err := exportToSink(payloadArchiver{payload}, &pb.ExportVolumeRequest{Id: "c1", Path: "/data", Sink: sk.path(), SinkToken: sk.token}, st)
	require.True(t, ok)
	require.NoError(t, err)
	require.Len(t, st.sent, 1)
	assert.Empty(t, st.sent[0].GetData())
	assert.Equal(t, int64(len(payload)), st.sent[0].GetSinkBytes())
	require.NoError(t, sk.wait(context.Background(), st.sent[0].GetSinkBytes(), "export"))
	assert.True(t, sk.used())
	assert.True(t, bytes.Equal(payload, out.Bytes()))
}

// A stream that ends before the length the call reports is an error,
// never a short snapshot.
func TestSnapshot_ATarCutShortThroughTheSocketIsAnError(t *testing.T) {
	sk, err := openSink()
	require.NoError(t, err)
	go sk.serve(io.Discard, func() {})
	defer sk.close()
	c, err := net.Dial("unix", sk.path())
	require.NoError(t, err)
	_, err = c.Write(append(append([]byte{}, sk.token...), pattern(100)...))
	require.NoError(t, err)
	c.Close()
	err = sk.wait(context.Background(), 200, "export volume at /data of c1")
	assert.ErrorContains(t, err, "cut short: 100 of 200 bytes")
}

// The caller's write error (the auto snapshot's size bound) ends the
// transfer: the plugin's writes fail, and wait returns that error.
func TestSnapshot_ACallerWriteErrorEndsTheSocketTransfer(t *testing.T) {
	sk, err := openSink()
	require.NoError(t, err)
	bound := errors.New("above the bound")
	aborted := make(chan struct{})
	go sk.serve(writerFunc(func(p []byte) (int, error) { return 0, bound }), func() { close(aborted) })
	defer sk.close()
	st := &sentStream{ctx: context.Background()}
	ok, err := exportToSink(payloadArchiver{pattern(64 << 20)}, &pb.ExportVolumeRequest{Id: "c1", Path: "/data", Sink: sk.path(), SinkToken: sk.token}, st)
	assert.True(t, ok)
	assert.Error(t, err, "the plugin's write fails once the caller stops reading")
	<-aborted
	assert.ErrorIs(t, sk.wait(context.Background(), 0, "export"), bound)
}

// A sink the plugin cannot reach leaves the tar to the messages.
func TestSnapshot_AnUnreachableSinkFallsBackToMessages(t *testing.T) {
	st := &sentStream{ctx: context.Background()}
	ok, err := exportToSink(payloadArchiver{pattern(10)}, &pb.ExportVolumeRequest{Id: "c1", Path: "/data", Sink: t.TempDir() + "/none", SinkToken: make([]byte, sinkTokenLen)}, st)
	assert.False(t, ok)
	assert.NoError(t, err)
	assert.Empty(t, st.sent)
}

// copyConn stops at the writer's error and says which side failed.
func TestSnapshot_TheSocketCopyStopsAtTheWritersError(t *testing.T) {
	a, b := net.Pipe()
	go func() {
		_, _ = a.Write(pattern(3 * sinkBuffer))
		a.Close()
	}()
	boom := errors.New("disk full")
	taken := 0
	n, werr, rerr := copyConn(writerFunc(func(p []byte) (int, error) {
		if taken >= sinkBuffer {
			return 0, boom
		}
		taken += len(p)
		return len(p), nil
	}), b)
	assert.ErrorIs(t, werr, boom)
	assert.NoError(t, rerr)
	assert.Equal(t, int64(taken), n)
	b.Close()
}

// recordingArchiver's restore reads the whole tar and keeps it, and the
// error the read ended with.
type recordingArchiver struct {
	payloadArchiver
	got     []byte
	readErr error
	done    chan struct{} // closed once a restore has read its tar
}

func (a *recordingArchiver) RestoreVolume(_ context.Context, _ string, r io.Reader) error {
	a.got, a.readErr = io.ReadAll(r)
	close(a.done)
	return a.readErr
}

// restored waits until a's restore has read its tar.
func (a *recordingArchiver) restored(t *testing.T) {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the runtime's restore never ended")
	}
}

// oldServer is a plugin from before RestoreVolumeFrom.
type oldServer struct{ *RuntimeGRPCServer }

func (oldServer) RestoreVolumeFrom(context.Context, *pb.RestoreSourceRequest) (*pb.Empty, error) {
	return nil, status.Error(codes.Unimplemented, "unknown method RestoreVolumeFrom")
}

// serveArchiver serves a runtime with a over gRPC on a Unix socket (old:
// without RestoreVolumeFrom) and returns the client.
func serveArchiver(t *testing.T, a volumeArchiver, old bool) *RuntimeClient {
	t.Helper()
	ln, err := net.Listen("unix", t.TempDir()+"/grpc")
	require.NoError(t, err)
	srv := grpc.NewServer()
	impl := &RuntimeGRPCServer{impl: struct {
		core.Runtime
		volumeArchiver
	}{nil, a}}
	if old {
		pb.RegisterRuntimeServer(srv, oldServer{impl})
	} else {
		pb.RegisterRuntimeServer(srv, impl)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return NewClient(conn, wire.Origin{Name: "runtime/test"})
}

// A restore's tar reaches the runtime whole through the source socket,
// and through messages from a plugin without it.
func TestSnapshot_ARestoreTarReachesTheRuntimeWholeEitherWay(t *testing.T) {
	payload := pattern(4<<20 + 9)
	for _, old := range []bool{false, true} {
		a := &recordingArchiver{done: make(chan struct{})}
		c := serveArchiver(t, a, old)
		require.NoError(t, c.RestoreVolume(context.Background(), "blog-data", bytes.NewReader(payload)), "old plugin: %v", old)
		a.restored(t)
		assert.True(t, bytes.Equal(payload, a.got), "old plugin %v: %d bytes in, %d out", old, len(payload), len(a.got))
	}
}

// A snapshot that turns out damaged part way (its digest check fails at
// the end) fails the restore with that reason, and the runtime never sees
// a clean end of the tar.
func TestSnapshot_ADamagedSnapshotNeverLooksWholeToTheRuntime(t *testing.T) {
	a := &recordingArchiver{done: make(chan struct{})}
	c := serveArchiver(t, a, false)
	damaged := errors.New("snapshot s1 volume data is damaged")
	r := io.MultiReader(bytes.NewReader(pattern(3<<20)), iotest.ErrReader(damaged))
	err := c.RestoreVolume(context.Background(), "blog-data", r)
	require.ErrorIs(t, err, damaged)
	a.restored(t)
	require.Error(t, a.readErr, "the runtime's read of the tar failed rather than ending cleanly")
	assert.ErrorIs(t, a.readErr, io.ErrUnexpectedEOF)
}

// A connection that sends nothing does not hold up the plugin's: the
// transfer completes while the stranger still waits for its hello to
// time out, and closing the sink ends the stranger at once.
func TestSnapshot_AStrangerThatSendsNothingDelaysNoTransfer(t *testing.T) {
	sk, err := openSink()
	require.NoError(t, err)
	var out bytes.Buffer
	go sk.serve(&out, func() {})
	stranger, err := net.Dial("unix", sk.path())
	require.NoError(t, err)
	defer stranger.Close()

	payload := pattern(1 << 20)
	st := &sentStream{ctx: context.Background()}
	ok, err := exportToSink(payloadArchiver{payload}, &pb.ExportVolumeRequest{Id: "c1", Path: "/data", Sink: sk.path(), SinkToken: sk.token}, st)
	require.True(t, ok)
	require.NoError(t, err)
	require.NoError(t, sk.wait(context.Background(), st.sent[0].GetSinkBytes(), "export"))
	assert.True(t, bytes.Equal(payload, out.Bytes()))

	_ = stranger.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err = stranger.Read(make([]byte, 1))
	var ne net.Error
	require.ErrorAs(t, err, &ne, "the stranger is still in its hello: the transfer did not wait for it")
	assert.True(t, ne.Timeout())

	sk.close()
	_ = stranger.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = stranger.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "close ends a connection still in its hello")
}
