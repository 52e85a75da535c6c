package handoff

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// FuzzParseRequest checks the HTTP/1.1 loop's request parser against
// net/http's: a head the loop accepts must be one net/http accepts too,
// with the same method, target and host, so the loop never proxies what
// net/http would have answered 400.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: app.test\r\n\r\n",
		"HEAD /a?b=c HTTP/1.1\r\nHost: App.Test:8080\r\nConnection: close, X-A\r\nX-A: 1\r\n\r\n",
		"GET /%41 HTTP/1.1\r\nhost: a\r\nContent-Length: 0\r\nTE: trailers\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: \t v \t\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /next HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\nGET /n HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /s HTTP/1.1\r\nHost: a\r\n\r\n",
		"\r\nPUT /x HTTP/1.1\nHost: a\nContent-Length: 1\n\nzGET / HTTP/1.1\nHost: a\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		checkFraming(t, head)
		var req h1wire.Request
		if !h1wire.ParseRequest(head, &req) {
			return
		}
		want, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("loop accepts %q, net/http rejects it: %v", head, err)
		}
		if want.Method != string(req.Method) || want.RequestURI != string(req.URI) || want.Host != string(req.Host) {
			t.Fatalf("loop parsed %q %q %q, net/http %q %q %q", req.Method, req.URI, req.Host, want.Method, want.RequestURI, want.Host)
		}
		if want.Close != req.Close {
			t.Fatalf("close: loop %v, net/http %v", req.Close, want.Close)
		}
	})
}

// checkFraming compares the request framing guard.go follows on handed-off
// connections with net/http's on the byte stream data (requests with
// bodies, Content-Length or chunked, pipelined), fed in pieces: every
// request net/http reads whole, the tracker finds too, in order, with the
// same method and target, until the tracker stops on purpose (a
// connection that closes or becomes a tunnel).
func checkFraming(t *testing.T, data []byte) {
	type seen struct{ method, target string }
	var want []seen
	br := bufio.NewReader(bytes.NewReader(data))
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			break
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			break
		}
		want = append(want, seen{r.Method, r.RequestURI})
		if r.Header.Get("Upgrade") != "" {
			break // a tunnel, if the backend agrees: the tracker stops
		}
	}
	var ft framingTracker
	step := len(data)%7 + 1
	for i := 0; i < len(data); i += step {
		ft.feed(data[i:min(i+step, len(data))])
	}
	for i, w := range want {
		if i >= len(ft.verdicts) {
			if ft.state == ftOff {
				return
			}
			t.Fatalf("net/http read %d requests from %q, the tracker found %d", len(want), data, len(ft.verdicts))
		}
		if v := ft.verdicts[i]; v.method != w.method || v.target != w.target {
			t.Fatalf("request %d of %q: net/http %s %s, tracker %s %s", i, data, w.method, w.target, v.method, v.target)
		}
	}
}
