package dataplane_test

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// BenchmarkConnectionNamedHeaders parses and rewrites a head whose
// Connection header names n headers that all follow (the quadratic case of
// a naive check: n names times n headers); ns/op should grow linearly in n.
func BenchmarkConnectionNamedHeaders(b *testing.B) {
	for _, n := range []int{40, 400, 4000} {
		var conn, hdrs strings.Builder
		for i := range n {
			if i > 0 {
				conn.WriteString(",")
			}
			fmt.Fprintf(&conn, "x-h%d", i)
			fmt.Fprintf(&hdrs, "X-H%d: v\r\n", i)
		}
		head := []byte("GET / HTTP/1.1\r\nHost: app.test\r\nConnection: " + conn.String() + "\r\n" + hdrs.String() + "\r\n")
		b.Run(fmt.Sprintf("names=%d/bytes=%d", n, len(head)), func(b *testing.B) {
			hc := &dataplane.H1Conn{Peer: "192.0.2.1", PeerIP: netip.MustParseAddr("192.0.2.1")}
			bw := bufio.NewWriterSize(io.Discard, 64<<10)
			for b.Loop() {
				if !h1wire.ParseRequest(head, &hc.Req) {
					b.Fatal("not parsed")
				}
				hc.WriteOutgoing(bw)
			}
		})
	}
}
