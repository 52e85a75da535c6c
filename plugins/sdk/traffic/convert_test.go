package traffic

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// A route's response header timeout crosses the plugin protocol.
func TestGraphRoundTripKeepsResponseHeaderTimeout(t *testing.T) {
	g := routetable.Graph{HTTP: []routetable.HTTPRoute{{Host: "a.example", App: "blog", Service: "web",
		Backends: []routetable.Backend{{Addr: "127.0.0.1:30001", Container: "c1"}}, ResponseHeaderTimeoutMS: 90000}}}
	back := graphFromProto(graphToProto(g))
	assert.Equal(t, int64(90000), back.HTTP[0].ResponseHeaderTimeoutMS)
	assert.Equal(t, g.HTTP, back.HTTP)
}

// What the edge serves crosses the plugin protocol whole: liveness, when
// the status was written, listeners with their bind errors, retired
// backends.
func TestStatusRoundTripKeepsLivenessAndListeners(t *testing.T) {
	st := core.TrafficStatus{
		AppliedGeneration: 9, Error: "bad table",
		Backends:        []routetable.BackendStatus{{Addr: "127.0.0.1:30001", InFlight: 2, OpenConns: 3}},
		Stale:           true,
		UpdatedAt:       time.UnixMilli(1764590000123).UTC(),
		Listeners:       []routetable.ListenerStatus{{Addr: ":80", Proto: "http"}, {Addr: ":5432", Proto: "tcp", Error: "address already in use"}},
		RetiredBackends: []string{"127.0.0.1:30001"},
	}
	assert.Equal(t, st, statusFromProto(statusToProto(st)))
	live := statusFromProto(statusToProto(core.TrafficStatus{AppliedGeneration: 1}))
	assert.False(t, live.Stale, "a backend that says nothing is live")
	assert.True(t, live.UpdatedAt.IsZero())
}

// A TCP route's instances cross the plugin protocol.
func TestReplicas_GraphRoundTripKeepsL4Instances(t *testing.T) {
	bs := []routetable.Backend{{Addr: "127.0.0.1:30001", Container: "c1"}, {Addr: "127.0.0.1:30002", Container: "c2"}}
	g := routetable.Graph{TCP: []routetable.L4Route{{Listen: "0.0.0.0:9000", App: "blog", Service: "db", Backend: bs[0].Addr, Container: "c1", Backends: bs}}}
	back := graphFromProto(graphToProto(g))
	assert.Equal(t, g.TCP, back.TCP)
}

// R73 and R62: a route's basic_auth, allow and hsts cross the plugin
// protocol (without them the edge would serve the host unprotected).
func TestR73_GraphRoundTripKeepsAccessRulesAndHSTS(t *testing.T) {
	g := routetable.Graph{HTTP: []routetable.HTTPRoute{{Host: "a.example", App: "blog", Service: "web",
		Backends:  []routetable.Backend{{Addr: "127.0.0.1:30001", Container: "c1"}},
		BasicAuth: []string{"alice:$2y$05$abcdefghijklmnopqrstuuJ0eH2mGd1lE1q8cJf0m3yJ9o2pY7u3W"},
		Allow:     []string{"10.0.0.0/8", "::1/128"},
		HSTS:      "max-age=60"}}}
	back := graphFromProto(graphToProto(g))
	assert.Equal(t, g.HTTP, back.HTTP)
}

// R75: a route's maintenance (message and allow) crosses the plugin
// protocol; without it the edge would serve the host as usual.
func TestR75_GraphRoundTripKeepsMaintenance(t *testing.T) {
	g := routetable.Graph{HTTP: []routetable.HTTPRoute{
		{Host: "a.example", App: "blog", Service: "web",
			Backends:    []routetable.Backend{{Addr: "127.0.0.1:30001", Container: "c1"}},
			Maintenance: &routetable.Maintenance{Message: "back <soon>", Allow: []string{"10.0.0.0/8", "::1/128"}}},
		{Host: "b.example", App: "blog", Service: "web", Stopped: true, Maintenance: &routetable.Maintenance{}},
		{Host: "c.example", App: "shop", Service: "web", Backends: []routetable.Backend{{Addr: "127.0.0.1:30002", Container: "c2"}}},
	}}
	back := graphFromProto(graphToProto(g))
	assert.Equal(t, g.HTTP, back.HTTP)
}

func TestR21_StatusRoundTripKeepsEjections(t *testing.T) {
	until := time.UnixMilli(1_780_000_000_123).UTC()
	st := core.TrafficStatus{AppliedGeneration: 4, Backends: []routetable.BackendStatus{
		{Addr: "172.18.0.2:8080", InFlight: 1},
		{Addr: "172.18.0.3:8080", EjectedUntil: until, EjectReason: "connect failed"},
	}}
	got := statusFromProto(statusToProto(st))
	assert.Equal(t, st, got)
	assert.True(t, got.Backends[0].EjectedUntil.IsZero(), "an admitted backend stays admitted")
}

// R76: the cumulative per-backend request and error counts the deploy
// monitor reads cross the plugin protocol (a field the proto lacks would
// be dropped silently).
func TestR76_StatusRoundTripKeepsRequestAndErrorCounts(t *testing.T) {
	st := core.TrafficStatus{AppliedGeneration: 3, Backends: []routetable.BackendStatus{
		{Addr: "127.0.0.1:30001", InFlight: 1, Requests: 1234, Errors: 56},
		{Addr: "127.0.0.1:30002"},
	}}
	back := statusFromProto(statusToProto(st))
	assert.Equal(t, st.Backends, back.Backends)
	assert.Equal(t, int64(1234), back.Backends[0].Requests)
	assert.Equal(t, int64(56), back.Backends[0].Errors)
}

// Every field of an HTTP route crosses the plugin protocol: a field the
// proto lacks is dropped silently, and the edge then refuses or misreads
// the route (an "unavailable" route arrived as a route without backends,
// and the edge rejected every table: stop then start failed). The route
// below sets every field; a new field fails this test until it is set
// here, and then the round trip checks it. DialTimeoutMS is the one field
// core never sets (hand-written edge tables only), so it is not sent.
func TestGraphRoundTripKeepsEveryHTTPRouteField(t *testing.T) {
	full := routetable.HTTPRoute{
		Host: "a.example", App: "blog", Service: "web",
		Backends:                []routetable.Backend{{Addr: "10.0.0.2:8080", Container: "c1"}},
		ResponseHeaderTimeoutMS: 1500,
		Hold:                    &routetable.Hold{Until: time.UnixMilli(1_780_000_000_123).UTC(), Queue: 7},
		Stopped:                 true,
		Unavailable:             true,
		TLS:                     "always",
		Protocol:                "h2c",
		HSTS:                    "max-age=60",
		BasicAuth:               []string{"u:$2y$05$abc"},
		Allow:                   []string{"10.0.0.0/8"},
		Maintenance:             &routetable.Maintenance{Message: "soon", Allow: []string{"::1/128"}},
		Asleep:                  &routetable.Asleep{WakeTimeoutMS: 30_000, Ignore: []string{"/robots.txt"}},
	}
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if name == "DialTimeoutMS" {
			continue
		}
		assert.False(t, v.Field(i).IsZero(), "set HTTPRoute.%s in this test (and carry it in traffic.proto)", name)
	}
	back := graphFromProto(graphToProto(routetable.Graph{HTTP: []routetable.HTTPRoute{full}}))
	require.Len(t, back.HTTP, 1)
	assert.Equal(t, full, back.HTTP[0])
}

// The same for L4 routes (TCP and UDP).
func TestGraphRoundTripKeepsEveryL4RouteField(t *testing.T) {
	full := routetable.L4Route{Listen: "127.0.0.1:19000", App: "blog", Service: "db", Backend: "10.0.0.2:5432", Container: "c1",
		Backends: []routetable.Backend{{Addr: "10.0.0.2:5432", Container: "c1"}, {Addr: "10.0.0.3:5432", Container: "c2"}},
		Hold:     &routetable.Hold{Until: time.UnixMilli(1_780_000_000_123).UTC(), Queue: 3}, IdleTimeoutMS: 600_000, MaxConns: 50,
		Asleep: &routetable.Asleep{WakeTimeoutMS: 20_000}}
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		assert.False(t, v.Field(i).IsZero(), "set L4Route.%s in this test (and carry it in traffic.proto)", v.Type().Field(i).Name)
	}
	back := graphFromProto(graphToProto(routetable.Graph{TCP: []routetable.L4Route{full}, UDP: []routetable.L4Route{full}}))
	require.Len(t, back.TCP, 1)
	require.Len(t, back.UDP, 1)
	assert.Equal(t, full, back.TCP[0])
	assert.Equal(t, full, back.UDP[0])
}

// R81: a sleeping service's routes (HTTP and TCP, with their wake bound
// and ignored paths) cross the plugin protocol; without them the edge
// would refuse a route without backends.
func TestR81_GraphRoundTripKeepsAsleep(t *testing.T) {
	asleep := &routetable.Asleep{WakeTimeoutMS: 30_000, Ignore: []string{"/robots.txt"}}
	g := routetable.Graph{
		HTTP: []routetable.HTTPRoute{{Host: "a.example", App: "blog", Service: "web", Asleep: asleep}},
		TCP:  []routetable.L4Route{{Listen: "127.0.0.1:9000", App: "blog", Service: "db", Asleep: &routetable.Asleep{}}},
	}
	back := graphFromProto(graphToProto(g))
	assert.Equal(t, g.HTTP, back.HTTP)
	assert.Equal(t, g.TCP, back.TCP)
}
