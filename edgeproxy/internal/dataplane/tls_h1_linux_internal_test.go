//go:build linux

package dataplane

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/edgetls"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/evloop"
)

// The h1 loop over TLS never reaches a TLS connection's descriptor (no
// event loop adoption, no raw reads), while PeerClosed still sees the
// client leave (it queries the TCP state of the socket underneath).
func TestTLSConnGetsNoRawDescriptorButPeerClosedSeesTheClientLeave(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cert, err := edgetls.SelfSigned()
	require.NoError(t, err)
	accepted := make(chan *tls.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{*cert}})
		if tc.Handshake() == nil {
			accepted <- tc
		}
	}()
	client, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	require.NoError(t, err)
	var server *tls.Conn
	select {
	case server = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no handshake")
	}
	defer server.Close()

	assert.False(t, rawControl(server, func(int) { t.Error("a TLS connection's descriptor was reached") }))
	l := &evLoop{p: &evloop.Poller{}}
	assert.False(t, l.adopt(server), "an event loop never adopts a TLS connection")
	assert.True(t, l.p.InboxEmpty())
	assert.True(t, (&H1Conn{Conn: server}).isTLS())
	assert.Equal(t, "https", (&H1Conn{Conn: server}).scheme())

	assert.False(t, PeerClosed(server), "client still connected")
	require.NoError(t, client.Close())
	assert.Eventually(t, func() bool { return PeerClosed(server) }, 5*time.Second, 10*time.Millisecond, "client's close seen under TLS")
}
