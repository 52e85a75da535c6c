package h2srv

import (
	"bytes"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// R62 (HTTP/2 server preface, RFC 9113 §3.4): SETTINGS is the first frame
// the edge sends on a connection even when a drain reaches the connection
// between its registration (the edge's tls_accept.go) and Serve: the drain's GOAWAY
// went out first, and a client (Go's among them) takes a connection whose
// first frame is not SETTINGS for a protocol error instead of a graceful
// GOAWAY.
func TestR62_H2SettingsPrecedeADrainsGoAway(t *testing.T) {
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	c := NewConn(tls.Server(p1, &tls.Config{}), Config{})
	c.Drain(time.Hour)
	c.wmu.Lock()
	out := bytes.Clone(c.out.b)
	c.wmu.Unlock()
	fr := http2.NewFramer(nil, bytes.NewReader(out))
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatalf("no frame queued: %v", err)
	}
	if _, ok := f.(*http2.SettingsFrame); !ok {
		t.Fatalf("first frame %v, want SETTINGS", f.Header())
	}
}
