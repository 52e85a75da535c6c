package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Feed holds the latest Snapshot and tells its subscribers when a new one
// is published. It is safe for concurrent use.
type Feed struct {
	mu    sync.Mutex
	snap  Snapshot
	have  bool
	ready chan struct{}
	subs  map[chan struct{}]struct{}
}

// NewFeed returns a Feed without a Snapshot yet.
func NewFeed() *Feed {
	return &Feed{ready: make(chan struct{}), subs: map[chan struct{}]struct{}{}}
}

// Publish makes s the latest Snapshot (numbering it) and wakes every
// subscriber; a subscriber that has not read the previous wake-up gets one
// wake-up for both.
func (f *Feed) Publish(s Snapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.Seq = f.snap.Seq + 1
	f.snap = s
	if !f.have {
		f.have = true
		close(f.ready)
	}
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Latest returns the latest Snapshot, waiting for the first one until ctx
// ends.
func (f *Feed) Latest(ctx context.Context) (Snapshot, error) {
	select {
	case <-f.ready:
	case <-ctx.Done():
		return Snapshot{}, fmt.Errorf("dashboard: no state read yet: %w", ctx.Err())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap, nil
}

// Subscribe returns a channel that receives a value after each Publish,
// and the function that ends the subscription (call it once done).
func (f *Feed) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
	}
}

// Subscribers is how many subscriptions are open.
func (f *Feed) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// MinInterval is the shortest interval between two periodic reads: the
// dashboard polls nothing faster than once a second. Journal writes are
// not polled: they are watched.
const MinInterval = time.Second

// JournalDebounce is how long after a journal write the Feed reads the
// state again (the writes of one step come in a burst). Reads during a
// long burst still happen every JournalDebounce.
const JournalDebounce = 100 * time.Millisecond

// RunLocal publishes c's Snapshots to f until ctx ends: one at once, one
// within JournalDebounce of each write under the state directory's apps
// (watched, stateDir ""; not watched), and one every interval (raised to
// MinInterval) for what the journal does not record (containers, the
// edge's counters). It fails when the first read fails.
func RunLocal(ctx context.Context, f *Feed, c *Collector, stateDir string, interval time.Duration) error {
	interval = max(interval, MinInterval)
	snap, err := c.Collect(ctx)
	if err != nil {
		return err
	}
	f.Publish(snap)
	changes := make(chan struct{}, 1)
	if stateDir != "" {
		w, err := watchJournal(stateDir, changes)
		if err != nil {
			return err
		}
		defer w.Close()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
			if debounce == nil {
				debounce = time.After(JournalDebounce)
			}
			continue
		case <-debounce:
			debounce = nil
		case <-tick.C:
		}
		snap, err := c.Collect(ctx)
		if err != nil {
			snap = Snapshot{At: time.Now().UTC(), Problems: []string{err.Error()}}
		}
		f.Publish(snap)
	}
}

// WriteFeed writes f's Snapshots to w, one JSON object a line, from the
// latest one on, until ctx ends or a write fails (the reader went away).
// It is what a runner on a remote engine sends the dashboard.
func WriteFeed(ctx context.Context, f *Feed, w io.Writer) error {
	wake, cancel := f.Subscribe()
	defer cancel()
	enc := json.NewEncoder(w)
	var sent uint64
	for {
		snap, err := f.Latest(ctx)
		if err != nil {
			return nil
		}
		if snap.Seq != sent {
			if err := enc.Encode(snap); err != nil {
				return fmt.Errorf("dashboard: send the state: %w", err)
			}
			sent = snap.Seq
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
	}
}

// ReadFeed publishes to f each Snapshot WriteFeed wrote to r, until r
// ends (an error unless ctx ended first).
func ReadFeed(ctx context.Context, r io.Reader, f *Feed) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var snap Snapshot
		if err := json.Unmarshal(sc.Bytes(), &snap); err != nil {
			return fmt.Errorf("dashboard: the remote runner sent a line that is not a state snapshot (is the runner the same version?): %w", err)
		}
		f.Publish(snap)
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("dashboard: read the remote runner's output: %w", err)
	}
	return fmt.Errorf("dashboard: the remote runner stopped sending (see its error above)")
}
