package edgeproxy

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/edgetls"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h2srv"
)

// h2Pair serves one HTTP/2 connection of a bare Server (idle timeout
// idle) and returns the client's framer; done closes when the
// connection has left the drain's count.
func h2Pair(t *testing.T, idle time.Duration) (fr *http2.Framer, client *tls.Conn, done chan struct{}) {
	t.Helper()
	s := &Server{Core: dataplane.Core{Logger: hclog.NewNullLogger(), Reg: &dataplane.Registry{}}}
	s.ConnSrv = &dataplane.ConnServer{Core: &s.Core, IdleTimeout: idle, H2Conns: map[*h2srv.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	cert, err := edgetls.SelfSigned()
	require.NoError(t, err)
	done = make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2"}})
		if tc.Handshake() != nil {
			return
		}
		s.ConnSrv.WG.Add(1)
		s.newH2Conn(tc).Serve()
		s.ConnSrv.WG.Wait()
		close(done)
	}()
	client, err = tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	require.NoError(t, client.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(client, http2.ClientPreface)
	require.NoError(t, err)
	fr = http2.NewFramer(client, client)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	require.NoError(t, fr.WriteSettings())
	return fr, client, done
}

// R62 (HTTP/2): a connection with no stream for the idle timeout ends
// with GOAWAY NO_ERROR (last stream 0) and closes; PINGs do not keep it
// open.
func TestR62_H2IdleConnectionEndsWithGoAway(t *testing.T) {
	fr, _, done := h2Pair(t, 300*time.Millisecond)
	start := time.Now()
	go func() {
		for range 3 {
			// PINGs spread over the idle timeout: the passage of time
			// with pings in it is the behaviour under test.
			time.Sleep(50 * time.Millisecond)
			_ = fr.WritePing(false, [8]byte{})
		}
	}()
	var ga *http2.GoAwayFrame
	for ga == nil {
		f, err := fr.ReadFrame()
		require.NoError(t, err, "the connection ended without GOAWAY")
		ga, _ = f.(*http2.GoAwayFrame)
	}
	assert.Equal(t, http2.ErrCodeNo, ga.ErrCode)
	assert.Equal(t, uint32(0), ga.LastStreamID)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the idle connection did not end")
	}
}

// R62 (HTTP/2): a client that does not send the preface is closed
// without a request being read, and the connection leaves the drain's
// count.
func TestR62_H2BadPrefaceCloses(t *testing.T) {
	s := &Server{Core: dataplane.Core{Logger: hclog.NewNullLogger(), Reg: &dataplane.Registry{}}}
	s.ConnSrv = &dataplane.ConnServer{Core: &s.Core, H2Conns: map[*h2srv.Conn]struct{}{}}
	a, b := net.Pipe()
	defer a.Close()
	cert, err := edgetls.SelfSigned()
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		tc := tls.Server(b, &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2"}})
		if tc.Handshake() == nil {
			s.ConnSrv.WG.Add(1)
			s.newH2Conn(tc).Serve()
			s.ConnSrv.WG.Wait()
		}
		close(done)
	}()
	client := tls.Client(a, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	require.NoError(t, client.Handshake())
	go func() { _, _ = io.Copy(io.Discard, client) }()
	_, err = io.WriteString(client, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a bad preface did not end the connection")
	}
}
