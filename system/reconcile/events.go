package reconcile

import (
	"context"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// engineEventActions are the container events after which an instance's
// address or liveness may have changed (SPEC R41): the watcher runs a pass
// for the container's app at once instead of at the next interval.
var engineEventActions = []string{"die", "start", "restart", "destroy", "health_status"}

// eventResubscribe is the wait before re-subscribing after the engine's
// event stream ended (engine restarting, connection lost).
const eventResubscribe = time.Second

// EventSource is the part of the engine API WatchEngineEvents uses.
type EventSource interface {
	Events(ctx context.Context, options client.EventsListOptions) client.EventsResult
}

// WatchEngineEvents follows the engine's events of managed workload
// containers (engineEventActions) and sends each event's app (label
// dev.gordon.app) on wake; a send never blocks (a full wake channel
// already holds a pending pass). It re-subscribes eventResubscribe after
// the stream ends, and then sends "" (any app: the engine may have
// restarted, so every app is re-resolved). It returns when ctx ends.
func WatchEngineEvents(ctx context.Context, api EventSource, wake chan<- string, log hclog.Logger) {
	f := make(client.Filters).Add("type", string(events.ContainerEventType)).
		Add("label", core.LabelManaged+"=true").Add("label", core.LabelRole+"=workload").
		Add("event", engineEventActions...)
	first := true
	for ctx.Err() == nil {
		res := api.Events(ctx, client.EventsListOptions{Filters: f})
		if !first {
			send(wake, "")
		}
		first = false
	loop:
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-res.Messages:
				if !ok {
					break loop
				}
				if app := m.Actor.Attributes[core.LabelApp]; app != "" {
					send(wake, app)
				}
			case err := <-res.Err:
				if ctx.Err() == nil {
					log.Warn("engine event stream ended; re-subscribing", "error", err)
				}
				break loop
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(eventResubscribe):
		}
	}
}

func send(wake chan<- string, app string) {
	select {
	case wake <- app:
	default:
	}
}

// DrainWake returns the apps pending on wake: nil (every app) when any
// pending wake names no app, else the distinct names.
func DrainWake(first string, wake <-chan string) []string {
	all := first == ""
	seen := map[string]bool{first: true}
	apps := []string{first}
	for {
		select {
		case app := <-wake:
			if app == "" {
				all = true
			}
			if !seen[app] {
				seen[app] = true
				apps = append(apps, app)
			}
		default:
			if all {
				return nil
			}
			return apps
		}
	}
}

// WokenApps is the pass an engine event asks for, as Reconcile's apps
// argument: the woken apps among the watched ones (an empty non-nil
// slice: every app, when woken is nil and every app is watched); nil when
// no watched app was woken (no pass).
func WokenApps(watched, woken []string) []string {
	if woken == nil {
		if len(watched) == 0 {
			return []string{}
		}
		return watched
	}
	if len(watched) == 0 {
		return woken
	}
	var out []string
	for _, a := range woken {
		if slices.Contains(watched, a) {
			out = append(out, a)
		}
	}
	return out
}
