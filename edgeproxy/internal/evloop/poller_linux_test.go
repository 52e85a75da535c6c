//go:build linux

package evloop

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

type closer struct{ closed bool }

func (c *closer) Close() error { c.closed = true; return nil }

func TestSerialKeepsItsTagAndChanges(t *testing.T) {
	p := &Poller{}
	a, b := p.NextSerial(TagUp), p.NextSerial(TagUp)
	assert.Equal(t, TagUp, Tag(a))
	assert.Equal(t, TagClient, Tag(p.NextSerial(TagClient)))
	assert.NotEqual(t, a, b, "a new registration of the same descriptor is told apart")
}

func TestAdoptWakesTheLoopWithTheDescriptor(t *testing.T) {
	p, err := New(8)
	require.NoError(t, err)
	from := &closer{}
	require.True(t, p.Adopt(42, from))
	assert.True(t, from.closed, "what the descriptor was duplicated from is closed")
	assert.False(t, p.InboxEmpty())

	evs, err := p.Wait(1, 1000)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, TagWake, Tag(evs[0].Pad))
	p.ClearWake()
	assert.Equal(t, []int{42}, p.TakeInbox())
	assert.True(t, p.InboxEmpty())
	evs, err = p.Wait(0, 0)
	require.NoError(t, err)
	assert.Empty(t, evs, "a cleared wake-up does not report again")
	assert.Empty(t, p.Close())
}

func TestClosedPollerReturnsItsInboxAndRefusesMore(t *testing.T) {
	p, err := New(8)
	require.NoError(t, err)
	require.True(t, p.Adopt(7, &closer{}))
	assert.Equal(t, []int{7}, p.Close(), "queued and not taken: the caller closes it")
	from := &closer{}
	assert.False(t, p.Adopt(8, from))
	assert.False(t, from.closed, "a refused adoption leaves the source open")
	p.Signal() // no write to a closed eventfd
}

func TestDialedConnectionRelaysAndIsReleased(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	p, err := New(8)
	require.NoError(t, err)
	defer p.Close()

	ap := netip.MustParseAddrPort(ln.Addr().String())
	fd, connecting, err := Dial(ap)
	require.NoError(t, err)
	pad := p.NextSerial(TagUp)
	require.NoError(t, p.Add(fd, unix.EPOLLIN|unix.EPOLLOUT|unix.EPOLLRDHUP|unix.EPOLLET, pad))
	if connecting {
		evs, err := p.Wait(0, 5000)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		assert.Equal(t, pad, evs[0].Pad)
		assert.NotZero(t, evs[0].Events&unix.EPOLLOUT, "a finished connect is writable")
	}
	errno, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	require.NoError(t, err)
	require.Zero(t, errno)

	srv, err := ln.Accept()
	require.NoError(t, err)
	defer srv.Close()
	peer, err := PeerAddr(fd)
	require.NoError(t, err)
	assert.Equal(t, ln.Addr().String(), peer.String())

	n, err := RawWrite(fd, []byte("ping"))
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	got := make([]byte, 4)
	_, err = io.ReadFull(srv, got)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(got))

	_, err = RawRead(fd, got)
	assert.Equal(t, unix.EAGAIN, err, "non-blocking: nothing to read yet")
	_, err = srv.Write([]byte("pong"))
	require.NoError(t, err)
	nc, err := p.Release(fd)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.ReadFull(nc, got)
	require.NoError(t, err)
	assert.Equal(t, "pong", string(got), "the released conn reads on from where the loop left")
}

func TestDialRefusedIsADialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ap := netip.MustParseAddrPort(ln.Addr().String())
	require.NoError(t, ln.Close())
	fd, connecting, err := Dial(ap)
	if err == nil {
		// Refused asynchronously: SO_ERROR tells, as the loop reads it.
		defer unix.Close(fd)
		require.True(t, connecting)
		p, err := New(8)
		require.NoError(t, err)
		defer p.Close()
		require.NoError(t, p.Add(fd, unix.EPOLLOUT|unix.EPOLLET, p.NextSerial(TagUp)))
		evs, err := p.Wait(0, 5000)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		errno, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		require.NoError(t, err)
		assert.Equal(t, unix.ECONNREFUSED, unix.Errno(errno))
		return
	}
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	assert.Equal(t, "dial", op.Op)
	assert.Equal(t, -1, fd)
}
