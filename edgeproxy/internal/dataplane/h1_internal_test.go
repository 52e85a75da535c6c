package dataplane

import (
	"testing"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// A connection that served one huge request does not keep its buffers
// while idle (breaker finding: ~1 MB per idle connection).
func TestIdleConnectionShrinksBuffers(t *testing.T) {
	hc := &H1Conn{head: make([]byte, 0, 64<<10), rhead: make([]byte, 0, 1<<20)}
	hc.Req.Headers = make([]h1wire.Header, 16000)
	hc.resp.Headers = make([]h1wire.Header, 5000)
	hc.shrink()
	if cap(hc.head) > 8<<10 || cap(hc.rhead) > 8<<10 || cap(hc.Req.Headers) > 64 || cap(hc.resp.Headers) > 64 {
		t.Errorf("buffers kept: head %d rhead %d req %d resp %d", cap(hc.head), cap(hc.rhead), cap(hc.Req.Headers), cap(hc.resp.Headers))
	}
	small := &H1Conn{head: make([]byte, 0, 1024)}
	small.Req.Headers = make([]h1wire.Header, 0, 16)
	small.shrink()
	if cap(small.head) != 1024 || cap(small.Req.Headers) != 16 {
		t.Error("small buffers are kept for reuse")
	}
}
