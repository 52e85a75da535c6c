package edgeproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

const goodTable = `{"schema":1,"generation":3,
 "http":[{"host":"Blog.Example.com","app":"blog","service":"web","backends":[{"addr":"127.0.0.1:18080","container":"c1"}]},
         {"host":"*.example.com","app":"blog","service":"web","backends":[{"addr":"127.0.0.1:18081","container":"c2"}]}],
 "tcp":[{"listen":"0.0.0.0:9000","app":"blog","service":"db","backend":"127.0.0.1:19000"}],
 "udp":[{"listen":":28015","app":"blog","service":"game","backend":"127.0.0.1:28016"}]}`

// Decision 11 / STYLE "What we take" 12: the loader decodes strictly and
// lowercases hosts.
func TestDecision11_LoadTableAcceptsValidTable(t *testing.T) {
	tbl, err := edgeproxy.LoadTable([]byte(goodTable))
	require.NoError(t, err)
	assert.Equal(t, uint64(3), tbl.Generation)
	require.Len(t, tbl.HTTP, 2)
	assert.Equal(t, "blog.example.com", tbl.HTTP[0].Host)
	assert.Equal(t, "127.0.0.1:19000", tbl.TCP[0].Backend)
	assert.Equal(t, ":28015", tbl.UDP[0].Listen)

	empty, err := edgeproxy.LoadTable([]byte(`{"schema":1,"generation":1,"http":null,"tcp":[],"udp":null}`))
	require.NoError(t, err)
	assert.Empty(t, empty.HTTP)
}

// Decision 11: every malformed table is rejected with ErrInvalidTable and a
// message naming the problem.
func TestDecision11_LoadTableRejectsBadTables(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"not json", `{`, "decode"},
		{"trailing data", `{"schema":1,"generation":1}{}`, "trailing data"},
		{"unknown field", `{"schema":1,"generation":1,"extra":true}`, "unknown field"},
		{"wrong schema", `{"schema":2,"generation":1}`, "schema 2"},
		{"bad host", `{"schema":1,"http":[{"host":"bad host","backends":[{"addr":"127.0.0.1:1"}]}]}`, `host "bad host"`},
		{"wildcard in the middle", `{"schema":1,"http":[{"host":"a.*.com","backends":[{"addr":"127.0.0.1:1"}]}]}`, "character '*'"},
		{"empty label", `{"schema":1,"http":[{"host":"a..com","backends":[{"addr":"127.0.0.1:1"}]}]}`, "empty"},
		{"hyphen edge", `{"schema":1,"http":[{"host":"-a.com","backends":[{"addr":"127.0.0.1:1"}]}]}`, "starts or ends"},
		{"duplicate host case-insensitive", `{"schema":1,"http":[{"host":"a.com","backends":[{"addr":"127.0.0.1:1"}]},{"host":"A.com","backends":[{"addr":"127.0.0.1:2"}]}]}`, "routed twice"},
		{"no backends", `{"schema":1,"http":[{"host":"a.com","backends":[]}]}`, "no backends"},
		{"backend without IP", `{"schema":1,"http":[{"host":"a.com","backends":[{"addr":"localhost:80"}]}]}`, "not an IP"},
		{"backend port 0", `{"schema":1,"http":[{"host":"a.com","backends":[{"addr":"127.0.0.1:0"}]}]}`, "1..65535"},
		{"backend port too big", `{"schema":1,"http":[{"host":"a.com","backends":[{"addr":"127.0.0.1:70000"}]}]}`, "1..65535"},
		{"tcp listen unparsable", `{"schema":1,"tcp":[{"listen":"9000","backend":"127.0.0.1:1"}]}`, "listen"},
		{"tcp duplicate listen", `{"schema":1,"tcp":[{"listen":":9000","backend":"127.0.0.1:1"},{"listen":":9000","backend":"127.0.0.1:2"}]}`, "used twice"},
		{"udp bad backend", `{"schema":1,"udp":[{"listen":":9000","backend":":1"}]}`, "not an IP"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := edgeproxy.LoadTable([]byte(c.doc))
			require.Error(t, err)
			assert.ErrorIs(t, err, edgeproxy.ErrInvalidTable)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// FuzzLoadTable: the loader never panics, and whatever it accepts passes
// validation again after a JSON round trip (the snapshot build relies on
// that), with lowercase unique hosts.
func FuzzLoadTable(f *testing.F) {
	f.Add([]byte(goodTable))
	f.Add([]byte(`{"schema":1,"generation":1}`))
	f.Add([]byte(`{"schema":1,"http":[{"host":"*.a.b","backends":[{"addr":"[::1]:80"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tbl, err := edgeproxy.LoadTable(data)
		if err != nil {
			require.ErrorIs(t, err, edgeproxy.ErrInvalidTable)
			return
		}
		again, err := edgeproxy.LoadTable(mustJSON(t, tbl))
		require.NoError(t, err)
		require.Equal(t, tbl, again)
		seen := map[string]bool{}
		for _, r := range tbl.HTTP {
			require.Equal(t, strings.ToLower(r.Host), r.Host)
			require.False(t, seen[r.Host])
			seen[r.Host] = true
			require.NotEmpty(t, r.Backends)
		}
	})
}

// BenchmarkHandler measures one request through the edge handler (lookup,
// in-flight accounting, reverse proxy) to an httptest backend over a kept
// alive loopback connection; run with -benchmem for allocations per request.
func BenchmarkHandler(b *testing.B) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer be.Close()
	srv := edgeproxy.New(edgeproxy.Config{})
	tbl := routetable.Table{Schema: routetable.Schema, Generation: 1, Graph: routetable.Graph{HTTP: []routetable.HTTPRoute{
		{Host: "other.test", Backends: []routetable.Backend{{Addr: be.Listener.Addr().String()}}},
		{Host: "*.example.com", Backends: []routetable.Backend{{Addr: be.Listener.Addr().String()}}},
		{Host: "app.test", Backends: []routetable.Backend{{Addr: be.Listener.Addr().String()}}},
	}}}
	require.NoError(b, srv.Apply(tbl))
	req := httptest.NewRequest(http.MethodGet, "http://app.test/", nil)
	req.RemoteAddr = "127.0.0.1:5555"
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
