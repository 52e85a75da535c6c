package runtime

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// A restore's tar takes the same path as an export's the other way
// (volume_sink.go): the caller offers a socket, the plugin connects and
// reads the tar in frames (a 4-byte big-endian length, then that many
// bytes; length 0 ends it). The end frame is only written once the
// caller has read the whole snapshot and checked its digest, so a
// damaged snapshot or a dead caller ends the plugin's stream without it:
// an error, never a short restore that looks whole.

// errNoSource: the plugin cannot take the tar from a socket (an older
// plugin, or one that cannot connect): the caller sends messages.
var errNoSource = errors.New("no source socket")

// restoreFrom is RestoreVolume through a source socket, or errNoSource.
func (c *RuntimeClient) restoreFrom(ctx context.Context, volume string, r io.Reader) error {
	src, err := openSink()
	if err != nil {
		return errNoSource
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go src.feed(r, cancel)
	defer src.close()
	_, err = c.rpc.RestoreVolumeFrom(sctx, &pb.RestoreSourceRequest{Volume: volume, Source: src.path(), SourceToken: src.token})
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented && !src.used() {
		return errNoSource
	}
	if src.used() {
		src.close()
		if src.err != nil {
			return fmt.Errorf("restore volume %s: read the snapshot: %w", volume, src.err)
		}
	}
	return c.archiveErr(ctx, "restore volume", err)
}

// feed writes r, framed, to the connection that presents the token. A
// failed read of r (a damaged snapshot) is kept in s.err, ends the
// connection without the end frame, and calls abort.
func (s *sink) feed(r io.Reader, abort func()) {
	defer close(s.done)
	c := s.accept()
	if c == nil {
		return
	}
	defer c.Close()
	buf := make([]byte, 4+sinkBuffer)
	for {
		k, err := r.Read(buf[4:])
		if k > 0 {
			binary.BigEndian.PutUint32(buf, uint32(k))
			if _, werr := c.Write(buf[:4+k]); werr != nil {
				s.rerr = werr // the plugin ended the call: its status says why
				return
			}
			s.n += int64(k)
		}
		if errors.Is(err, io.EOF) {
			binary.BigEndian.PutUint32(buf, 0)
			if _, werr := c.Write(buf[:4]); werr != nil {
				s.rerr = werr
			}
			return
		}
		if err != nil {
			s.err = err
			abort()
			return
		}
	}
}

// RestoreVolumeFrom serves volumeArchiver's restore from the caller's
// socket; Unimplemented when impl has none or the socket cannot be
// reached (the caller then sends RestoreVolume messages).
func (s *RuntimeGRPCServer) RestoreVolumeFrom(ctx context.Context, req *pb.RestoreSourceRequest) (*pb.Empty, error) {
	va, ok := s.impl.(volumeArchiver)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "runtime restores no volume snapshots")
	}
	c, err := dialCaller(ctx, req.GetSource(), req.GetSourceToken())
	if err != nil {
		return nil, status.Error(codes.Unimplemented, "the caller's socket cannot be reached: "+err.Error())
	}
	defer c.Close()
	fr := &frameReader{r: bufio.NewReaderSize(c, sinkBuffer)}
	if err := va.RestoreVolume(ctx, req.GetVolume(), fr); err != nil {
		return nil, archiveStatus(err)
	}
	if !fr.done {
		return nil, status.Errorf(codes.Internal, "restore volume %s: the runtime stopped reading the snapshot before its end", req.GetVolume())
	}
	return &pb.Empty{}, nil
}

// frameReader reads a source socket's frames as one stream: io.EOF at the
// end frame only; a connection that ends before it is an error.
type frameReader struct {
	r    *bufio.Reader
	left uint32
	done bool
}

func (f *frameReader) Read(p []byte) (int, error) {
	if f.done {
		return 0, io.EOF
	}
	if f.left == 0 {
		var h [4]byte
		if _, err := io.ReadFull(f.r, h[:]); err != nil {
			return 0, fmt.Errorf("the snapshot's stream ended before its end: %w", io.ErrUnexpectedEOF)
		}
		f.left = binary.BigEndian.Uint32(h[:])
		if f.left == 0 {
			f.done = true
			return 0, io.EOF
		}
		if f.left > sinkBuffer {
			return 0, fmt.Errorf("the snapshot's stream is malformed: a frame of %d bytes", f.left)
		}
	}
	n, err := f.r.Read(p[:min(len(p), int(f.left))])
	f.left -= uint32(n)
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("the snapshot's stream ended before its end: %w", io.ErrUnexpectedEOF)
	}
	return n, err
}
