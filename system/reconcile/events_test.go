package reconcile

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
	go WatchEngineEvents(ctx, f, wake, hclog.NewNullLogger())

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
	assert.Equal(t, []string{"kv", "shop"}, DrainWake("kv", wake))
	require.Empty(t, wake)
	wake <- ""
	assert.Nil(t, DrainWake("kv", wake), "an app-less wake: every app")

	assert.Equal(t, []string{"kv"}, WokenApps(nil, []string{"kv"}))
	assert.Equal(t, []string{}, WokenApps(nil, nil), "every app")
	assert.Equal(t, []string{"kv"}, WokenApps([]string{"kv", "blog"}, []string{"kv", "shop"}))
	assert.Nil(t, WokenApps([]string{"blog"}, []string{"shop"}), "no watched app woken: no pass")
	assert.Equal(t, []string{"blog"}, WokenApps([]string{"blog"}, nil))
}
