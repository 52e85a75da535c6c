package upstream

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replayed is a backend connection that still replays left bytes read
// before (as the edge's event loops hand one over).
type replayed struct {
	net.Conn
	left int
}

func (c *replayed) Unread() int { return c.left }

// listenBackend accepts (and holds) connections until the test ends.
func listenBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	return ln.Addr().String()
}

// A connection put back clean is the next Get's (reused); one whose
// replayed bytes are not all read is closed instead of pooled, and the
// next Get dials.
func TestPutPoolsOnlyConnectionsWithNothingLeftToRead(t *testing.T) {
	tr := NewTransport(listenBackend(t), time.Second, time.Minute)
	ctx := context.Background()
	fc, reused, err := tr.Get(ctx, 0, true)
	require.NoError(t, err)
	assert.False(t, reused, "an empty pool dials")
	tr.Put(fc)
	again, reused, err := tr.Get(ctx, 0, true)
	require.NoError(t, err)
	assert.True(t, reused)
	assert.Same(t, fc, again)

	tr.Put(NewConn(&replayed{Conn: again.C, left: 3}))
	fresh, reused, err := tr.Get(ctx, 0, true)
	require.NoError(t, err)
	assert.False(t, reused, "a connection with replayed bytes unread is not pooled")
	assert.NotSame(t, again, fresh)
	_, err = again.C.Write([]byte("x"))
	assert.ErrorIs(t, err, net.ErrClosed, "it was closed")
	_ = fresh.C.Close()
}
