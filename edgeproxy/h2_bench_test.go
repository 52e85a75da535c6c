package edgeproxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// BenchmarkH2Proxy measures one HTTP/2 request (a stream) through a
// running edge's HTTPS listener to a raw backend, sequentially on one
// connection driven frame by frame: a GET takes the fast path, a POST
// without a body ServeHTTP (ReverseProxy). The connection is replaced,
// off the clock, before the edge's stream budget per connection ends it.
func BenchmarkH2Proxy(b *testing.B) {
	for _, method := range []string{"GET", "POST"} {
		name := map[string]string{"GET": "fast_path", "POST": "servehttp"}[method]
		b.Run(name, func(b *testing.B) { benchmarkH2Proxy(b, method) })
	}
}

func benchmarkH2Proxy(b *testing.B, method string) {
	backend := helloBackend(b)
	dir := b.TempDir()
	ca := newTestCA(b)
	cert, key := ca.valid(b, "h2.test")
	_, err := certstore.AddStatic(dir, "h2.test", cert, key, time.Now())
	require.NoError(b, err)
	srv := edgeproxy.New(edgeproxy.Config{StateDir: dir, HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0",
		PollInterval: 20 * time.Millisecond, ACME: edgeproxy.ACMEConfig{Disabled: true}})
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = srv.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-srv.Ready()
	require.NoError(b, srv.Apply(httpTable(1, route("h2.test", backend))))

	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":path", "/"}, {":authority", "h2.test"}, {"user-agent", "bench"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	var c *benchH2
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if c == nil || c.next > 1800 {
			b.StopTimer()
			if c != nil {
				c.c.Close()
			}
			c = dialBenchH2(b, srv.HTTPSAddr(), ca.pool)
			b.StartTimer()
		}
		c.roundTrip(b, block.Bytes())
	}
	b.StopTimer()
	c.c.Close()
}

// benchH2 is the benchmark's client connection.
type benchH2 struct {
	c      *tls.Conn
	fr     *http2.Framer
	next   uint32 // the next stream id
	unacks uint32 // DATA bytes not given back to the connection window
}

// dialBenchH2 connects (ALPN H2) once the certificate is served, and
// sends the preface and settings.
func dialBenchH2(b *testing.B, addr string, pool *x509.CertPool) *benchH2 {
	var c *tls.Conn
	require.Eventually(b, func() bool {
		var err error
		c, err = tls.Dial("tcp", addr, &tls.Config{ServerName: "h2.test", RootCAs: pool, NextProtos: []string{"h2"}})
		return err == nil
	}, 6*time.Second, 20*time.Millisecond, "certificate for h2.test not served")
	require.Equal(b, "h2", c.ConnectionState().NegotiatedProtocol)
	_, err := io.WriteString(c, http2.ClientPreface)
	require.NoError(b, err)
	h := &benchH2{c: c, fr: http2.NewFramer(c, c), next: 1}
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	require.NoError(b, h.fr.WriteSettings())
	return h
}

// roundTrip sends one request (HEADERS with END_STREAM) and reads frames
// until its stream ends.
func (h *benchH2) roundTrip(b *testing.B, block []byte) {
	id := h.next
	h.next += 2
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
		b.Fatal(err)
	}
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = h.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = h.fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame, *http2.RSTStreamFrame:
			b.Fatalf("stream %d: %v", id, f.Header())
		case *http2.MetaHeadersFrame:
			if f.PseudoValue("status") != "200" {
				b.Fatalf("stream %d: status %s", id, f.PseudoValue("status"))
			}
			if f.StreamID == id && f.StreamEnded() {
				return
			}
		case *http2.DataFrame:
			if h.unacks += f.Length; h.unacks > 32<<10 {
				_ = h.fr.WriteWindowUpdate(0, h.unacks)
				h.unacks = 0
			}
			if f.StreamID == id && f.StreamEnded() {
				return
			}
		}
	}
}
