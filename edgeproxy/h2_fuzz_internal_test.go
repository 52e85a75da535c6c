package edgeproxy

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/edgetls"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h2srv"
)

// panicLog records whether a stream handler panicked (h2srv.Stream.run logs
// it at Error and goes on: the fuzz target must see it).
type panicLog struct {
	hclog.Logger
	panicked atomic.Bool
}

func (l *panicLog) Error(msg string, args ...interface{}) {
	if strings.Contains(msg, "panic") {
		l.panicked.Store(true)
	}
}

var fuzzCert = sync.OnceValue(func() *tls.Certificate {
	c, err := edgetls.SelfSigned()
	if err != nil {
		panic(err)
	}
	return c
})

var (
	fuzzOnce sync.Once
	fuzzSrv  *Server
	fuzzLog  *panicLog
)

// fuzzServer is one Server (New, not run: no route table, so every
// request takes ServeHTTP and its 404 page) for every fuzz input.
func fuzzServer(stateDir string) (*Server, *panicLog) {
	fuzzOnce.Do(func() {
		fuzzLog = &panicLog{Logger: hclog.NewNullLogger()}
		fuzzSrv = New(Config{StateDir: stateDir, HTTPAddr: "127.0.0.1:0", Logger: fuzzLog})
		fuzzSrv.ConnSrv = &dataplane.ConnServer{Core: &fuzzSrv.Core, IdleTimeout: time.Minute, H2Conns: map[*h2srv.Conn]struct{}{}}
	})
	return fuzzSrv, fuzzLog
}

// h2FuzzSeeds are well-formed frame sequences (after the preface and an
// empty SETTINGS) the fuzzer mutates.
func h2FuzzSeeds() [][]byte {
	var seeds [][]byte
	frame := func(build func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer)) {
		var buf, hb bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		build(fr, hpack.NewEncoder(&hb), &hb)
		seeds = append(seeds, buf.Bytes())
	}
	head := func(enc *hpack.Encoder, kv ...string) {
		for i := 0; i < len(kv); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
	}
	frame(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
		head(enc, ":method", "GET", ":scheme", "https", ":path", "/", ":authority", "a.test", "cookie", "a=1", "x", "y", "cookie", "b=2")
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		_ = fr.WritePing(false, [8]byte{1})
		_ = fr.WriteWindowUpdate(0, 1000)
	})
	frame(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
		head(enc, ":method", "POST", ":scheme", "https", ":path", "/p", ":authority", "a.test", "content-length", "3", "trailer", "x-t")
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb.Bytes(), EndHeaders: true})
		_ = fr.WriteData(3, false, []byte("abc"))
		hb.Reset()
		head(enc, "x-t", "1")
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		_ = fr.WriteRSTStream(3, http2.ErrCodeCancel)
		_ = fr.WriteData(3, true, []byte("x"))
	})
	frame(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
		head(enc, ":method", "GET", ":scheme", "https", ":path", "/", ":authority", "a.test", "x-big", strings.Repeat("b", 3000))
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: hb.Bytes()[:10], EndStream: true})
		_ = fr.WriteContinuation(5, true, hb.Bytes()[10:])
		_ = fr.WritePriority(7, http2.PriorityParam{StreamDep: 7})
		_ = fr.WriteGoAway(5, http2.ErrCodeNo, nil)
	})
	return seeds
}

// FuzzH2Frames feeds arbitrary bytes, after the client preface and
// SETTINGS, to one HTTP/2 connection of a bare Server: no handler
// panics, the connection ends once the client has closed, and what the
// edge writes back stays bounded by what it was sent (no amplification,
// no unbounded buffering).
func FuzzH2Frames(f *testing.F) {
	for _, s := range h2FuzzSeeds() {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		s, log := fuzzServer(dir)
		log.panicked.Store(false)
		a, b := net.Pipe()
		defer a.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			tc := tls.Server(b, &tls.Config{Certificates: []tls.Certificate{*fuzzCert()}, NextProtos: []string{"h2"}})
			if tc.Handshake() != nil {
				return
			}
			s.ConnSrv.WG.Add(1)
			s.newH2Conn(tc).Serve()
			s.ConnSrv.WG.Wait()
		}()
		client := tls.Client(a, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		_ = client.SetDeadline(time.Now().Add(20 * time.Second))
		if err := client.Handshake(); err != nil {
			t.Fatal(err)
		}
		var got atomic.Int64
		go func() {
			n, _ := io.Copy(io.Discard, client)
			got.Add(n)
		}()
		var in bytes.Buffer
		in.WriteString(http2.ClientPreface)
		_ = http2.NewFramer(&in, nil).WriteSettings()
		in.Write(data)
		_, _ = client.Write(in.Bytes())
		_ = client.CloseWrite()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Fatal("the connection did not end after the client closed")
		}
		if log.panicked.Load() {
			t.Fatal("a stream handler panicked")
		}
		if bound := int64(64<<10 + 64*in.Len()); got.Load() > bound {
			t.Fatalf("%d bytes written for %d read (bound %d)", got.Load(), in.Len(), bound)
		}
	})
}
