package traffic

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/routetable"
)

// A route's response header timeout crosses the plugin protocol.
func TestGraphRoundTripKeepsResponseHeaderTimeout(t *testing.T) {
	g := routetable.Graph{HTTP: []routetable.HTTPRoute{{Host: "a.example", App: "blog", Service: "web",
		Backends: []routetable.Backend{{Addr: "127.0.0.1:30001", Container: "c1"}}, ResponseHeaderTimeoutMS: 90000}}}
	back := graphFromProto(graphToProto(g))
	assert.Equal(t, int64(90000), back.HTTP[0].ResponseHeaderTimeoutMS)
	assert.Equal(t, g.HTTP, back.HTTP)
}
