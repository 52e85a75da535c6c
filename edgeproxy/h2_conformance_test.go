package edgeproxy_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// R62 (HTTP/2, RFC 9113 §8.2.3): cookie fields that are not adjacent
// reach the backend as one Cookie line "a=1; c=3", the fields between
// them and every header the edge adds intact, on the fast path (GET,
// HEAD) and through ServeHTTP (POST).
func TestR62_H2NonAdjacentCookieCrumbsJoined(t *testing.T) {
	e, _ := tlsH1Edge(t, "crumbs.test", headerEcho(t))
	for _, method := range []string{"GET", "POST", "GET"} {
		r := dialRawH2(t, e, "crumbs.test")
		r.request(1, method == "GET", method, "/", "crumbs.test", "cookie", "a=1", "x-z", "z", "cookie", "c=3", "x-y", "y")
		if method == "POST" {
			require.NoError(t, r.fr.WriteData(1, true, []byte("x")))
		}
		a := r.readAnswer(1)
		require.Equal(t, "200", a.status, "%s: %s", method, a.body.String())
		got := a.body.String() + "\n"
		assert.Contains(t, got, "Cookie: a=1; c=3\n", method)
		assert.Contains(t, got, "X-Z: z\n", method)
		assert.Contains(t, got, "X-Y: y\n", method)
		assert.Contains(t, got, "X-Forwarded-For: 127.0.0.1\n", method)
		assert.Contains(t, got, "X-Forwarded-Proto: https", method)
		assert.Contains(t, got, "X-Request-Id: ", method)
		assert.Contains(t, got, "Forwarded: for=127.0.0.1", method)
	}
}

// requestFields sends HEADERS with END_STREAM for stream id carrying
// exactly the name, value pairs given.
func (r *rawH2) requestFields(id uint32, kv ...string) {
	r.t.Helper()
	r.hbuf.Reset()
	for i := 0; i < len(kv); i += 2 {
		require.NoError(r.t, r.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]}))
	}
	require.NoError(r.t, r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.hbuf.Bytes(), EndStream: true, EndHeaders: true}))
}

// R62 (HTTP/2, RFC 9113 §8.1.1, §8.2.1, §8.3.1; RFC 8441 §4): requests
// the edge used to take are malformed, their streams reset with
// PROTOCOL_ERROR and nothing sent to the backend: a host field that
// differs from :authority, two host fields, :protocol (extended CONNECT is
// not offered), a :scheme other than http/https, a value with leading or
// trailing whitespace, a :path with a fragment. The same request made
// well still passes on the same connection.
func TestR62_H2LenientRequestSemanticsAreMalformed(t *testing.T) {
	addr, hits := rawBackend(t, func(w io.Writer, req *http.Request) {
		_, _ = io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	e := h2EdgeTo(t, "strict.test", addr)
	base := func(kv ...string) []string {
		return append([]string{":method", "GET", ":scheme", "https", ":path", "/", ":authority", "strict.test"}, kv...)
	}
	cases := map[string][]string{
		"authority differs from host":        base("host", "other.test"),
		"two host fields":                    {":method", "GET", ":scheme", "https", ":path", "/", "host", "strict.test", "host", "strict.test"},
		":protocol without extended CONNECT": {":method", "GET", ":scheme", "https", ":path", "/", ":authority", "strict.test", ":protocol", "websocket"},
		":scheme javascript":                 {":method", "GET", ":scheme", "javascript", ":path", "/", ":authority", "strict.test"},
		"leading whitespace":                 base("x-v", " v"),
		"trailing whitespace":                base("x-v", "v\t"),
		"whitespace in :authority":           {":method", "GET", ":scheme", "https", ":path", "/", ":authority", "strict.test "},
		"fragment in :path":                  {":method", "GET", ":scheme", "https", ":path", "/a#b", ":authority", "strict.test"},
		"fragment in :path (POST)":           {":method", "POST", ":scheme", "https", ":path", "/a#b", ":authority", "strict.test"},
	}
	r := dialRawH2(t, e, "strict.test")
	id := uint32(1)
	for name, kv := range cases {
		r.requestFields(id, kv...)
		a := r.readAnswer(id)
		assert.True(t, a.wasReset, "%s: reset, got %q", name, a.status)
		assert.Equal(t, http2.ErrCodeProtocol, a.reset, name)
		id += 2
	}
	assert.Zero(t, hits.Load(), "a malformed request reached the backend")
	r.requestFields(id, base("host", "STRICT.test", "x-v", "a b")...)
	assert.Equal(t, "200", r.readAnswer(id).status, "host equal to :authority, inner space")
}
