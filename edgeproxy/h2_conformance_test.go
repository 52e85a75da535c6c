package edgeproxy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
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

var _ = http2.ErrCodeProtocol
