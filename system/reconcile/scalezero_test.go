package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// R81 (idle): a service sleeps once the edge saw nothing reach it for its
// sleep_after (counted from when the watcher began at the earliest); a
// service only sleeping services depend on sleeps with them; one an
// awake service depends on does not; a service the edge does not route
// now (held, unavailable) is not idle.
func TestR81_IdleServicesSleepDependantsFirst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	web := core.ServiceSpec{SleepAfter: core.Duration(6 * time.Second), DependsOn: []string{"db"},
		HTTP: []core.HTTPInterface{{Port: 80, Host: "a.example", Visibility: core.VisibilityPublic}}}
	db := core.ServiceSpec{SleepAfter: core.Duration(6 * time.Second)}
	a := core.Active{App: "blog", Services: map[string]*core.ActiveService{
		"web": {Container: "c-web", Spec: web}, "db": {Container: "c-db", Spec: db},
	}}
	act := []edgestate.ServiceActivity{{App: "blog", Service: "web", Last: t0}}

	got, _ := Idle(a, act, t0, t0.Add(5*time.Second))
	assert.Empty(t, got, "5 s idle of 6")
	got, why := Idle(a, act, t0, t0.Add(7*time.Second))
	assert.Equal(t, []string{"web", "db"}, got, "dependants first")
	assert.Contains(t, why, "web: no request for 7s")
	got, _ = Idle(a, act, t0.Add(3*time.Second), t0.Add(7*time.Second))
	assert.Empty(t, got, "the watcher's own start counts as activity")

	a.Services["web"].Spec.SleepAfter = 0
	got, _ = Idle(a, act, t0, t0.Add(time.Hour))
	assert.Empty(t, got, "db stays up under an awake web")

	a.Services["web"].Spec.SleepAfter = core.Duration(6 * time.Second)
	got, _ = Idle(a, nil, t0, t0.Add(time.Hour))
	assert.Empty(t, got, "web not routed now: not idle, and db stays with it")
}
