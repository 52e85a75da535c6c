// Package coretest holds stateful fakes of the core backends (runtime,
// probe, traffic, store) with one shared effect log, and a harness that
// wires them into an engine.Engine (STYLE "What we take" 10). Tests assert on
// resulting records and on the effect log, never on scripted call lists.
package coretest

import (
	"strings"
	"sync"
	"time"
)

// T0 is the start time fresh containers report (SPEC §4).
var T0 = time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)

// Clock is a settable core.Clock. The zero value reports the zero time; use
// &Clock{T: T0}.
type Clock struct {
	mu sync.Mutex
	T  time.Time
}

// Now returns T.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.T
}

// Set sets T.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.T = t
	c.mu.Unlock()
}

// Advance moves T forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.T = c.T.Add(d)
	c.mu.Unlock()
}

// Event is one effect: Kind (create, start, stop, remove, restart, inspect,
// binds, pull, ensure-network, ensure-volume, ready, probe-failed, traffic,
// traffic-failed, withdraw, publish-active, marker-save, marker-clear,
// journal-claim, journal-save, claims-register, claims-release, …), the ID
// it concerns (container ID, app, op id, "app/service") and a Detail.
type Event struct {
	Kind   string
	ID     string
	Detail string
}

// String is "kind id" (or "kind" when ID is empty).
func (e Event) String() string {
	if e.ID == "" {
		return e.Kind
	}
	return e.Kind + " " + e.ID
}

// Events is the shared, goroutine-safe, ordered effect log of all fakes.
// The zero value is ready to use.
type Events struct {
	mu   sync.Mutex
	list []Event
}

// Add appends an effect without detail.
func (ev *Events) Add(kind, id string) { ev.AddDetail(kind, id, "") }

// AddDetail appends an effect.
func (ev *Events) AddDetail(kind, id, detail string) {
	if ev == nil {
		return
	}
	ev.mu.Lock()
	ev.list = append(ev.list, Event{Kind: kind, ID: id, Detail: detail})
	ev.mu.Unlock()
}

// List returns a copy of every event in order.
func (ev *Events) List() []Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]Event(nil), ev.list...)
}

// Kinds returns the kinds in order.
func (ev *Events) Kinds() []string {
	var out []string
	for _, e := range ev.List() {
		out = append(out, e.Kind)
	}
	return out
}

// Seq returns "kind id" strings of the events whose kind is in kinds (all
// events when kinds is empty), in order: the form scenario orders are
// asserted in (e.g. []string{"create c-new", "start c-new", "ready c-new"}).
func (ev *Events) Seq(kinds ...string) []string {
	out := []string{}
	for _, e := range ev.List() {
		if len(kinds) > 0 && !in(kinds, e.Kind) {
			continue
		}
		out = append(out, e.String())
	}
	return out
}

// Index returns the position of the first event with kind and id (id ""
// matches any id), or -1.
func (ev *Events) Index(kind, id string) int {
	for i, e := range ev.List() {
		if e.Kind == kind && (id == "" || e.ID == id) {
			return i
		}
	}
	return -1
}

// LastIndex returns the position of the last matching event, or -1.
func (ev *Events) LastIndex(kind, id string) int {
	l := ev.List()
	for i := len(l) - 1; i >= 0; i-- {
		if l[i].Kind == kind && (id == "" || l[i].ID == id) {
			return i
		}
	}
	return -1
}

// Count returns how many events match kind and id (id "" matches any).
func (ev *Events) Count(kind, id string) int {
	n := 0
	for _, e := range ev.List() {
		if e.Kind == kind && (id == "" || e.ID == id) {
			n++
		}
	}
	return n
}

// Find returns the matching events in order.
func (ev *Events) Find(kind, id string) []Event {
	var out []Event
	for _, e := range ev.List() {
		if e.Kind == kind && (id == "" || e.ID == id) {
			out = append(out, e)
		}
	}
	return out
}

// Reset empties the log.
func (ev *Events) Reset() {
	ev.mu.Lock()
	ev.list = nil
	ev.mu.Unlock()
}

// String renders the log one event per line (for failure messages).
func (ev *Events) String() string {
	var b strings.Builder
	for _, e := range ev.List() {
		b.WriteString(e.String())
		if e.Detail != "" {
			b.WriteString(" [" + e.Detail + "]")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func in(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
