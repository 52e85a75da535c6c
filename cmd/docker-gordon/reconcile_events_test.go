package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// fakeEvents serves one stream per subscription: the messages of streams[i],
// then the stream's end (an error).
type fakeEvents struct {
	streams [][]events.Message
	subs    chan client.EventsListOptions
}

func (f *fakeEvents) Events(ctx context.Context, o client.EventsListOptions) client.EventsResult {
	n := len(f.subs)
	f.subs <- o
	msgs, errs := make(chan events.Message), make(chan error, 1)
	go func() {
		if n < len(f.streams) {
			for _, m := range f.streams[n] {
				select {
				case msgs <- m:
				case <-ctx.Done():
					return
				}
			}
		}
		errs <- errors.New("stream ended")
	}()
	return client.EventsResult{Messages: msgs, Err: errs}
}

func appEvent(app, action string) events.Message {
	return events.Message{Type: events.ContainerEventType, Action: events.Action(action),
		Actor: events.Actor{ID: "c1", Attributes: map[string]string{core.LabelApp: app}}}
}

func TestR41_WatcherWakesTheAppOfAManagedContainerEventAndEveryAppAfterTheStreamEnds(t *testing.T) {
	f := &fakeEvents{streams: [][]events.Message{{appEvent("kv", "die"), appEvent("kv", "start")}}, subs: make(chan client.EventsListOptions, 8)}
	wake := make(chan string, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watchEngineEvents(ctx, f, wake, hclog.NewNullLogger())

	got := func() string {
		select {
		case a := <-wake:
			return a
		case <-time.After(5 * time.Second):
			t.Fatal("no wake")
			return ""
		}
	}
	assert.Equal(t, "kv", got(), "die")
	assert.Equal(t, "kv", got(), "start")
	assert.Equal(t, "", got(), "after re-subscribing: every app, the engine may have restarted")
	o := <-f.subs
	for _, a := range engineEventActions {
		assert.True(t, o.Filters["event"][a], "follows %s", a)
	}
	assert.True(t, o.Filters["label"][core.LabelManaged+"=true"])
	assert.True(t, o.Filters["label"][core.LabelRole+"=workload"])
}

func TestR41_WakesCoalesceIntoOnePassOverTheWokenWatchedApps(t *testing.T) {
	wake := make(chan string, 8)
	wake <- "shop"
	wake <- "kv"
	wake <- "kv"
	assert.Equal(t, []string{"kv", "shop"}, drainWake("kv", wake))
	require.Empty(t, wake)
	wake <- ""
	assert.Nil(t, drainWake("kv", wake), "an app-less wake: every app")

	assert.Equal(t, []string{"kv"}, wokenApps(nil, []string{"kv"}))
	assert.Equal(t, []string{}, wokenApps(nil, nil), "every app")
	assert.Equal(t, []string{"kv"}, wokenApps([]string{"kv", "blog"}, []string{"kv", "shop"}))
	assert.Nil(t, wokenApps([]string{"blog"}, []string{"shop"}), "no watched app woken: no pass")
	assert.Equal(t, []string{"blog"}, wokenApps([]string{"blog"}, nil))
}

// A one-shot reconcile of an app the state directory holds no record of
// fails with ErrNotFound naming the app and the state directory; known
// apps (even busy or failing ones) are no such error.
func TestR39_ReconcileOfAnUnknownAppSaysWhereItsRecordsMayBe(t *testing.T) {
	require.NoError(t, unknownAppsError([]engine.ReconcileReport{{App: "blog"}, {App: "api", Skipped: true}}, "/s"))
	err := unknownAppsError([]engine.ReconcileReport{{App: "blog"}, {App: "shop", Unknown: true}}, "/var/lib/gordon")
	require.ErrorIs(t, err, core.ErrNotFound)
	require.Contains(t, err.Error(), "app shop: not known to state directory /var/lib/gordon")
	require.NotContains(t, err.Error(), "blog")
}

// A watcher prints an app's plain "ok" pass once, then again only after
// something else happened to the app (a retire, an error, a different
// count).
func TestOkPasses_AWatcherSaysAnUnchangedOkPassOnce(t *testing.T) {
	q := okPasses{}
	ok := engine.ReconcileReport{App: "web", Verified: []string{"a"}}
	assert.False(t, q.same(ok), "the first ok pass is printed")
	assert.True(t, q.same(ok), "the same ok pass is not")
	assert.False(t, q.same(engine.ReconcileReport{App: "kv", Verified: []string{"b"}}), "another app's is")
	retired := engine.ReconcileReport{App: "web", Verified: []string{"a"}, Retired: []string{"x"}}
	assert.False(t, q.same(retired), "a pass that did something is printed")
	assert.False(t, q.same(ok), "and the next ok pass is printed again")
	assert.False(t, q.same(engine.ReconcileReport{App: "web", Verified: []string{"a", "b"}}), "a different count is printed")
}
