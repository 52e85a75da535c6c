package h1wire

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
)

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
		var resp Response
		if ParseResponse(head, &resp, false) != nil {
			return
		}
		want, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), nil)
		if err != nil {
			t.Fatalf("loop relays %q, net/http rejects it: %v", head, err)
		}
		if want.StatusCode != resp.Code {
			t.Fatalf("%q: status loop %d, net/http %d", head, resp.Code, want.StatusCode)
		}
		if resp.Code < 200 || resp.Code == http.StatusNoContent || resp.Code == http.StatusNotModified {
			return // no body on either side
		}
		chunked := len(want.TransferEncoding) == 1 && want.TransferEncoding[0] == "chunked"
		switch {
		case resp.Chunked != chunked:
			t.Fatalf("%q: chunked loop %v, net/http %v", head, resp.Chunked, want.TransferEncoding)
		case !chunked && resp.UntilClose != (want.ContentLength < 0):
			t.Fatalf("%q: until close loop %v, net/http length %d", head, resp.UntilClose, want.ContentLength)
		case !chunked && !resp.UntilClose && resp.Length != want.ContentLength:
			t.Fatalf("%q: length loop %d, net/http %d", head, resp.Length, want.ContentLength)
		case resp.Close != want.Close:
			t.Fatalf("%q: close loop %v, net/http %v", head, resp.Close, want.Close)
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
		var req Request
		if got := ParseRequest([]byte(head), &req); got != want {
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
		"HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n":                                       ErrBadResponse,
		"HTTP/1.1 200 O\x00K\r\n\r\n":                                                ErrBadResponse,
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n":          ErrBadResponse,
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n":                              ErrBadResponse,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n":                ErrBadResponse,
		"HTTP/1.1 2x0 OK\r\n\r\n":                                                    ErrBadResponse,
		"HTTP/2 200\r\n\r\n":                                                         ErrBadResponse,
		"HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n":                                     ErrBadResponse,
	} {
		var resp Response
		if got := ParseResponse([]byte(head), &resp, false); got != want {
			t.Errorf("parseResponse(%q) = %v, want %v", head, got, want)
		}
	}
	var resp Response
	if err := ParseResponse([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n"), &resp, false); err != nil || !resp.Chunked || resp.Length != -1 {
		t.Errorf("chunked overrides Content-Length: %+v %v", resp, err)
	}
	if err := ParseResponse([]byte("HTTP/1.0 200 OK\r\n\r\n"), &resp, false); err != nil || !resp.UntilClose || !resp.Close {
		t.Errorf("HTTP/1.0 without length is read until close: %+v %v", resp, err)
	}
	if err := ParseResponse([]byte("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"), &resp, false); err != nil || !resp.NoBody {
		t.Errorf("304 has no body: %+v %v", resp, err)
	}
}

func TestChunkSizeAndTrailerRules(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "5": 5, "1a": 26, "FF": 255, "000000000000010": 16} {
		n, ok := ParseChunkSize([]byte(in))
		if !ok || n != want {
			t.Errorf("parseChunkSize(%q) = %d, %v; want %d", in, n, ok, want)
		}
	}
	for _, in := range []string{"", "-0", "+5", "0x5", " 5", "g", "1234567890abcdef"} {
		if _, ok := ParseChunkSize([]byte(in)); ok {
			t.Errorf("parseChunkSize(%q) accepted", in)
		}
	}
	if !ValidTrailer([]byte("X-Sum: 42")) || ValidTrailer([]byte("X-T: a\x00b")) || ValidTrailer([]byte("no colon")) {
		t.Error("validTrailer")
	}
}

// headerKind knows every client claim header, in any case.
func TestHeaderKindKnowsClientClaimsInAnyCase(t *testing.T) {
	for _, k := range ClientClaimHeaders {
		for _, name := range []string{k, strings.ToLower(k), strings.ToUpper(k)} {
			if got := HeaderKind([]byte(name)); got != HdrClientClaim {
				t.Errorf("headerKind(%q) = %d, want hdrClientClaim", name, got)
			}
		}
	}
}
