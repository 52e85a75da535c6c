package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// volumeArchiver over gRPC: a volume's tar travels in chunks of at
// most volumeChunk bytes (under gRPC's 4 MiB message bound).

// volumeArchiver is the engine's snapshot I/O (the engine's
// snapshot.Archiver, which the plugin side does not import): ExportVolume
// writes a tar of the volume mounted at path in a stopped container,
// RestoreVolume replaces a volume's content with a tar.
type volumeArchiver interface {
	ExportVolume(ctx context.Context, id, path string, w io.Writer) error
	RestoreVolume(ctx context.Context, volume string, r io.Reader) error
}

var _ volumeArchiver = (*RuntimeClient)(nil)

const volumeChunk = 1 << 20

// ExportVolume implements volumeArchiver: the tar comes through a sink
// when the plugin can reach one (volume_sink.go), else in messages.
func (c *RuntimeClient) ExportVolume(ctx context.Context, id, path string, w io.Writer) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	what := fmt.Sprintf("export volume at %s of %s", path, id)
	req := &pb.ExportVolumeRequest{Id: id, Path: path}
	sk, err := openSink()
	if err == nil {
		go sk.serve(w, cancel)
		defer sk.close()
		req.Sink, req.SinkToken = sk.path(), sk.token
	}
	// failed prefers the sink's write error (the reason the call ended).
	failed := func(err error) error {
		if sk != nil && sk.used() {
			sk.close()
			if sk.err != nil {
				return sk.err
			}
		}
		return c.archiveErr(ctx, "export volume", err)
	}
	stream, err := c.rpc.ExportVolume(sctx, req)
	if err != nil {
		return failed(err)
	}
	var sinkBytes int64
	viaSink := false
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return failed(err)
		}
		if m.GetViaSink() {
			viaSink, sinkBytes = true, m.GetSinkBytes()
		}
		if len(m.GetData()) == 0 {
			continue
		}
		if sk != nil && !sk.claim(sinkMessages) {
			return fmt.Errorf("%s: the runtime sent the tar both through the socket and in messages", what)
		}
		if _, err := w.Write(m.GetData()); err != nil {
			return fmt.Errorf("%s: write: %w", what, err)
		}
	}
	switch {
	case viaSink && sk != nil:
		return sk.wait(ctx, sinkBytes, what)
	case viaSink || (sk != nil && sk.used()):
		return fmt.Errorf("%s: the runtime's stream broke the protocol (socket and messages mixed)", what)
	}
	return nil
}

// RestoreVolume implements volumeArchiver: the tar goes through a source
// socket when the plugin has RestoreVolumeFrom (volume_source.go), else
// in messages.
func (c *RuntimeClient) RestoreVolume(ctx context.Context, volume string, r io.Reader) error {
	if err := c.restoreFrom(ctx, volume, r); !errors.Is(err, errNoSource) {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.RestoreVolume(sctx)
	if err != nil {
		return c.archiveErr(ctx, "restore volume", err)
	}
	buf := make([]byte, volumeChunk)
	first := true
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 || first {
			m := &pb.VolumeChunk{Data: buf[:n]}
			if first {
				m.Volume, first = volume, false
			}
			if err := stream.Send(m); err != nil {
				// The server ended the call: its status is in CloseAndRecv.
				_, err = stream.CloseAndRecv()
				return c.archiveErr(ctx, "restore volume", err)
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("restore volume %s: read the snapshot: %w", volume, rerr)
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		return c.archiveErr(ctx, "restore volume", err)
	}
	return nil
}

func (c *RuntimeClient) archiveErr(ctx context.Context, op string, err error) error {
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented {
		return unsupportedArchive{msg: fmt.Sprintf("runtime plugin: %s: %s", op, st.Message())}
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return c.err(ctx, op, err)
}

// ExportVolume serves volumeArchiver when impl has it.
func (s *RuntimeGRPCServer) ExportVolume(r *pb.ExportVolumeRequest, stream pb.Runtime_ExportVolumeServer) error {
	va, ok := s.impl.(volumeArchiver)
	if !ok {
		return status.Error(codes.Unimplemented, "runtime takes no volume snapshots")
	}
	if r.GetSink() != "" {
		if ok, err := exportToSink(va, r, stream); ok {
			return err
		}
	}
	w := &chunkWriter{send: func(b []byte) error { return stream.Send(&pb.VolumeChunk{Data: b}) }}
	if err := va.ExportVolume(stream.Context(), r.GetId(), r.GetPath(), w); err != nil {
		return archiveStatus(err)
	}
	return w.flush()
}

// RestoreVolume serves volumeArchiver when impl has it.
func (s *RuntimeGRPCServer) RestoreVolume(stream pb.Runtime_RestoreVolumeServer) error {
	va, ok := s.impl.(volumeArchiver)
	if !ok {
		return status.Error(codes.Unimplemented, "runtime restores no volume snapshots")
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	r := &chunkReader{pending: first.GetData(), recv: stream.Recv}
	if err := va.RestoreVolume(stream.Context(), first.GetVolume(), r); err != nil {
		return archiveStatus(err)
	}
	return stream.SendAndClose(&pb.Empty{})
}

// archiveStatus is err as a gRPC status: a runtime that cannot move this
// volume's data from where it runs (errors.ErrUnsupported) answers
// Unimplemented with its reason, which the client reports as an error
// wrapping errors.ErrUnsupported (an auto snapshot is then skipped with
// a warning).
func archiveStatus(err error) error {
	if errors.Is(err, errors.ErrUnsupported) {
		return status.Error(codes.Unimplemented, err.Error())
	}
	return wire.ToGRPC(err)
}

// unsupportedArchive is the plugin's reason for not moving a volume's
// data; it wraps errors.ErrUnsupported without repeating its text.
type unsupportedArchive struct{ msg string }

func (e unsupportedArchive) Error() string { return e.msg }
func (e unsupportedArchive) Unwrap() error { return errors.ErrUnsupported }

// chunkWriter buffers writes into messages of volumeChunk bytes.
type chunkWriter struct {
	buf  []byte
	send func([]byte) error
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		take := min(volumeChunk-len(w.buf), len(p))
		w.buf = append(w.buf, p[:take]...)
		p = p[take:]
		if len(w.buf) == volumeChunk {
			if err := w.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.send(w.buf)
	w.buf = make([]byte, 0, volumeChunk)
	return err
}

// chunkReader reads the data of received messages until io.EOF.
type chunkReader struct {
	pending []byte
	recv    func() (*pb.VolumeChunk, error)
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		m, err := r.recv()
		if err != nil {
			return 0, err
		}
		r.pending = m.GetData()
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}
