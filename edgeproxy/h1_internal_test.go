package edgeproxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
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
		var req h1Request
		if !parseRequest(head, &req) {
			return
		}
		want, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("loop accepts %q, net/http rejects it: %v", head, err)
		}
		if want.Method != string(req.method) || want.RequestURI != string(req.uri) || want.Host != string(req.host) {
			t.Fatalf("loop parsed %q %q %q, net/http %q %q %q", req.method, req.uri, req.host, want.Method, want.RequestURI, want.Host)
		}
		if want.Close != req.close {
			t.Fatalf("close: loop %v, net/http %v", req.close, want.Close)
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

// FuzzParseResponse checks the loop's response parser against net/http's:
// a head the loop relays is one net/http reads with the same status and
// the same body framing (chunked, Content-Length, until close, none) and
// keep-alive, so what the loop relays is what a net/http client would
// have taken the backend to say.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.0 200 OK\nContent-Length: 2\n\n",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
		"HTTP/1.1 500 Oops\r\nConnection: close, X-A\r\nX-A: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		var resp h1Response
		if parseResponse(head, &resp, false) != nil {
			return
		}
		want, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), nil)
		if err != nil {
			t.Fatalf("loop relays %q, net/http rejects it: %v", head, err)
		}
		if want.StatusCode != resp.code {
			t.Fatalf("%q: status loop %d, net/http %d", head, resp.code, want.StatusCode)
		}
		if resp.code < 200 || resp.code == http.StatusNoContent || resp.code == http.StatusNotModified {
			return // no body on either side
		}
		chunked := len(want.TransferEncoding) == 1 && want.TransferEncoding[0] == "chunked"
		switch {
		case resp.chunked != chunked:
			t.Fatalf("%q: chunked loop %v, net/http %v", head, resp.chunked, want.TransferEncoding)
		case !chunked && resp.untilClose != (want.ContentLength < 0):
			t.Fatalf("%q: until close loop %v, net/http length %d", head, resp.untilClose, want.ContentLength)
		case !chunked && !resp.untilClose && resp.length != want.ContentLength:
			t.Fatalf("%q: length loop %d, net/http %d", head, resp.length, want.ContentLength)
		case resp.close != want.Close:
			t.Fatalf("%q: close loop %v, net/http %v", head, resp.close, want.Close)
		}
	})
}

// The loop hands a request to net/http exactly when it cannot serve it
// whole on its own.
func TestParseRequestServesOnlyPlainBodilessRequests(t *testing.T) {
	for head, want := range map[string]bool{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n":                                 true,
		"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n":                                true,
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n":            true,
		"GET / HTTP/1.0\r\nHost: a\r\n\r\n":                                 false,
		"POST / HTTP/1.1\r\nHost: a\r\n\r\n":                                false,
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n":            false,
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n":   false,
		"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n":           false,
		"GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n":         false,
		"GET * HTTP/1.1\r\nHost: a\r\n\r\n":                                 false,
		"GET / HTTP/1.1\nHost: a\n\n":                                       false,
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n":                      false,
		"GET / HTTP/1.1\r\nHost: a b\r\n\r\n":                               false,
		"GET / HTTP/1.1\r\n\r\n":                                            false,
		"GET / HTTP/1.1\r\nHost: a\r\nX-Y: \x00\r\n\r\n":                    false,
		"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n":                             false,
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n":                                  false,
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nX: 1\r\n\r\n":  true,
		"GET / HTTP/1.1\r\nHost: a\r\nProxy-Connection: keep-alive\r\n\r\n": true,
		"GET /a%2Fb?x=%20 HTTP/1.1\r\nHost: [::1]:80\r\n\r\n":               true,
		"GET /a%2 HTTP/1.1\r\nHost: a\r\n\r\n":                              false,
		"GET / HTTP/1.1\r\nHost: a\r\nBad Name: 1\r\n\r\n":                  false,
		"GET / HTTP/1.1\r\nHost: a\r\nX-Obs: \xff\xfe\r\n\r\n":              true,
		"GET / HTTP/1.1\r\nHost: a\r\nX-Folded: a\r\n b\r\n\r\n":            false,
	} {
		var req h1Request
		if got := parseRequest([]byte(head), &req); got != want {
			t.Errorf("parseRequest(%q) = %v, want %v", head, got, want)
		}
	}
}

// A backend response the loop cannot relay faithfully is a 502, never
// passed on: control characters in the status or a header (response
// splitting), conflicting lengths, codings other than chunked.
func TestParseResponseRejectsWhatItCannotRelay(t *testing.T) {
	for head, want := range map[string]error{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n":                               nil,
		"HTTP/1.0 200 OK\nContent-Length: 2\n\n":                                     nil,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n": nil,
		"HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n":                                       errBadResponse,
		"HTTP/1.1 200 O\x00K\r\n\r\n":                                                errBadResponse,
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n":          errBadResponse,
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n":                              errBadResponse,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n":                errBadResponse,
		"HTTP/1.1 2x0 OK\r\n\r\n":                                                    errBadResponse,
		"HTTP/2 200\r\n\r\n":                                                         errBadResponse,
		"HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n":                                     errBadResponse,
	} {
		var resp h1Response
		if got := parseResponse([]byte(head), &resp, false); got != want {
			t.Errorf("parseResponse(%q) = %v, want %v", head, got, want)
		}
	}
	var resp h1Response
	if err := parseResponse([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n"), &resp, false); err != nil || !resp.chunked || resp.length != -1 {
		t.Errorf("chunked overrides Content-Length: %+v %v", resp, err)
	}
	if err := parseResponse([]byte("HTTP/1.0 200 OK\r\n\r\n"), &resp, false); err != nil || !resp.untilClose || !resp.close {
		t.Errorf("HTTP/1.0 without length is read until close: %+v %v", resp, err)
	}
	if err := parseResponse([]byte("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"), &resp, false); err != nil || !resp.noBody {
		t.Errorf("304 has no body: %+v %v", resp, err)
	}
}

func TestChunkSizeAndTrailerRules(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "5": 5, "1a": 26, "FF": 255, "000000000000010": 16} {
		n, ok := parseChunkSize([]byte(in))
		if !ok || n != want {
			t.Errorf("parseChunkSize(%q) = %d, %v; want %d", in, n, ok, want)
		}
	}
	for _, in := range []string{"", "-0", "+5", "0x5", " 5", "g", "1234567890abcdef"} {
		if _, ok := parseChunkSize([]byte(in)); ok {
			t.Errorf("parseChunkSize(%q) accepted", in)
		}
	}
	if !validTrailer([]byte("X-Sum: 42")) || validTrailer([]byte("X-T: a\x00b")) || validTrailer([]byte("no colon")) {
		t.Error("validTrailer")
	}
}

// A connection that served one huge request does not keep its buffers
// while idle (breaker finding: ~1 MB per idle connection).
func TestIdleConnectionShrinksBuffers(t *testing.T) {
	hc := &h1Conn{head: make([]byte, 0, 64<<10), rhead: make([]byte, 0, 1<<20)}
	hc.req.headers = make([]h1Header, 16000)
	hc.resp.headers = make([]h1Header, 5000)
	hc.shrink()
	if cap(hc.head) > 8<<10 || cap(hc.rhead) > 8<<10 || cap(hc.req.headers) > 64 || cap(hc.resp.headers) > 64 {
		t.Errorf("buffers kept: head %d rhead %d req %d resp %d", cap(hc.head), cap(hc.rhead), cap(hc.req.headers), cap(hc.resp.headers))
	}
	small := &h1Conn{head: make([]byte, 0, 1024)}
	small.req.headers = make([]h1Header, 0, 16)
	small.shrink()
	if cap(small.head) != 1024 || cap(small.req.headers) != 16 {
		t.Error("small buffers are kept for reuse")
	}
}

// headerKind knows every client claim header, in any case.
func TestHeaderKindKnowsClientClaimsInAnyCase(t *testing.T) {
	for _, k := range clientClaimHeaders {
		for _, name := range []string{k, strings.ToLower(k), strings.ToUpper(k)} {
			if got := headerKind([]byte(name)); got != hdrClientClaim {
				t.Errorf("headerKind(%q) = %d, want hdrClientClaim", name, got)
			}
		}
	}
}
