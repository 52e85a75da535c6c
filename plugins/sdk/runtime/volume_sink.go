package runtime

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// A volume's tar is the one bulk transfer of the runtime protocol. Sent
// as gRPC messages it costs about 90 ms per 100 MiB on two cores (framing,
// copies and flow control on both sides), time a sequential replacement
// holds the service's requests. So ExportVolume offers the plugin a sink:
// a Unix socket in a directory only this user can enter (mode 0700), which
// the plugin, this process's subprocess on the same host, connects to and
// writes the tar into as a plain byte stream after a 32-byte token. The
// call's last message then says so and carries the tar's length: the
// caller waits for the socket's copy to end and checks it, so a stream
// cut short, or one the caller had not yet taken when the call ended, is
// never a short snapshot. A plugin that cannot connect, or
// an older one, sends the tar in messages as before.

const (
	sinkTokenLen = 32
	// sinkBuffer is the copy buffer on both ends of a sink.
	sinkBuffer = 1 << 20
	// sinkHello bounds how long a connection has to present the token.
	sinkHello = 5 * time.Second
)

// sinkMode is what a sink's transfer went through.
type sinkMode int

const (
	sinkUnused   sinkMode = iota
	sinkSocket            // the tar came through the socket
	sinkMessages          // the tar came in messages (the plugin ignored the sink)
)

// sink is the caller's end of an ExportVolume bulk path. serve copies the
// one connection that presents the token to w; close ends it all.
type sink struct {
	dir   string
	ln    *net.UnixListener
	token []byte
	done  chan struct{}

	mu      sync.Mutex
	mode    sinkMode
	conn    net.Conn
	pending map[net.Conn]bool // connections still in their hello
	closed  bool
	n       int64 // bytes copied to w, valid once done is closed
	err     error // w's write error, valid once done is closed
	rerr    error // the connection's read error, valid once done is closed
}

// openSink listens on a fresh Unix socket in a private temporary
// directory. An error means no sink: the caller asks for messages.
func openSink() (*sink, error) {
	dir, err := os.MkdirTemp("", "gordon-vol-")
	if err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	token := make([]byte, sinkTokenLen)
	_, _ = rand.Read(token)
	return &sink{dir: dir, ln: ln, token: token, done: make(chan struct{})}, nil
}

func (s *sink) path() string { return s.ln.Addr().String() }

// claim sets the transfer's mode once; false when the other mode has it.
func (s *sink) claim(m sinkMode) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mode == sinkUnused {
		s.mode = m
	}
	return s.mode == m
}

func (s *sink) used() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode == sinkSocket
}

// accept returns the connection that presents the token, or nil once
// the listener is closed with none. Each connection's hello is read apart
// (at most sinkHello), so one that sends nothing delays no other.
func (s *sink) accept() net.Conn {
	got := make(chan net.Conn, 1) // claim lets one connection through
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		var hellos sync.WaitGroup
		defer hellos.Wait()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			if !s.track(c) {
				c.Close()
				continue
			}
			hellos.Add(1)
			go func() {
				defer hellos.Done()
				if s.hello(c) {
					got <- c
				}
			}()
		}
	}()
	select {
	case c := <-got:
		return c
	case <-ended:
		select {
		case c := <-got:
			return c
		default:
			return nil
		}
	}
}

// track notes c as pending its hello, so close can end it; false when the
// sink is closed already.
func (s *sink) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.pending == nil {
		s.pending = map[net.Conn]bool{}
	}
	s.pending[c] = true
	return true
}

// hello reads c's token and takes the sink for it; false (c closed) for a
// wrong or missing token, or when another connection took it.
func (s *sink) hello(c net.Conn) bool {
	got := make([]byte, sinkTokenLen)
	_ = c.SetReadDeadline(time.Now().Add(sinkHello))
	_, err := io.ReadFull(c, got)
	ok := err == nil && subtle.ConstantTimeCompare(got, s.token) == 1 && s.claim(sinkSocket)
	s.mu.Lock()
	delete(s.pending, c)
	if ok {
		s.conn = c
	}
	s.mu.Unlock()
	if !ok {
		c.Close()
		return false
	}
	_ = c.SetReadDeadline(time.Time{})
	_ = s.ln.Close()
	return true
}

// serve copies what the connection that presents the token sends to w
// until it ends. A failed write to w closes the connection (the plugin's
// call then fails) and calls abort.
func (s *sink) serve(w io.Writer, abort func()) {
	defer close(s.done)
	c := s.accept()
	if c == nil {
		return
	}
	n, werr, rerr := copyConn(w, c)
	c.Close()
	s.n, s.err, s.rerr = n, werr, rerr
	if werr != nil {
		abort()
	}
}

// wait waits for the socket's copy to end (the plugin closes the
// connection before it ends the call), at most until ctx ends, and checks
// it carried want bytes.
func (s *sink) wait(ctx context.Context, want int64, what string) error {
	select {
	case <-s.done:
	case <-ctx.Done():
		s.close()
		return ctx.Err()
	}
	if s.err != nil {
		return s.err
	}
	if s.rerr != nil {
		return fmt.Errorf("%s: read the runtime's stream: %w", what, s.rerr)
	}
	if s.n != want {
		return fmt.Errorf("%s: the runtime's stream was cut short: %d of %d bytes arrived", what, s.n, want)
	}
	return nil
}

// close stops accepting, ends the connections still in their hello and a
// copy still going, and removes the socket's directory; it waits for serve
// (or feed) to return.
func (s *sink) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.pending {
		c.Close()
	}
	if s.conn != nil {
		s.conn.Close()
	}
	s.mu.Unlock()
	<-s.done
	os.RemoveAll(s.dir)
}

// exportToSink is the plugin's side: it connects to the caller's sink,
// writes the token and the tar, closes the connection, and ends the call
// with the tar's length. ok is false when the sink cannot be reached: the
// caller then sends the tar in messages.
func exportToSink(va volumeArchiver, r *pb.ExportVolumeRequest, stream pb.Runtime_ExportVolumeServer) (ok bool, err error) {
	ctx := stream.Context()
	c, err := dialCaller(ctx, r.GetSink(), r.GetSinkToken())
	if err != nil {
		return false, nil
	}
	defer c.Close()
	bw := bufio.NewWriterSize(c, sinkBuffer)
	cw := &countingWriter{w: bw}
	if err := va.ExportVolume(ctx, r.GetId(), r.GetPath(), cw); err != nil {
		return true, archiveStatus(err)
	}
	if err := bw.Flush(); err != nil {
		return true, fmt.Errorf("export volume at %s of %s: write to the caller: %w", r.GetPath(), r.GetId(), err)
	}
	if err := c.Close(); err != nil {
		return true, fmt.Errorf("export volume at %s of %s: close the caller's stream: %w", r.GetPath(), r.GetId(), err)
	}
	return true, stream.Send(&pb.VolumeChunk{SinkBytes: cw.n, ViaSink: true})
}

// copyConn copies c to w in buffers of sinkBuffer bytes. It returns the
// bytes w took, w's error and c's (its end is not an error).
func copyConn(w io.Writer, c net.Conn) (n int64, werr, rerr error) {
	buf := make([]byte, sinkBuffer)
	for {
		k, err := c.Read(buf)
		if k > 0 {
			m, err := w.Write(buf[:k])
			n += int64(m)
			if err != nil {
				return n, err, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return n, nil, nil
		}
		if err != nil {
			return n, nil, err
		}
	}
}

// dialCaller is the plugin's side of a sink or source: it connects to
// the caller's socket at path and presents token.
func dialCaller(ctx context.Context, path string, token []byte) (net.Conn, error) {
	d := net.Dialer{Timeout: sinkHello}
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(token); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
