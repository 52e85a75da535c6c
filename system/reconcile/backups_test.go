package reconcile

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/lifecycle"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
)

// fakeBackuper has blog/db and shop/db always due; its backups fail while fail is set.
type fakeBackuper struct {
	mu   sync.Mutex
	runs []string
	fail bool
	// looks counts the calls of DueBackups (the watcher's ticks).
	looks int
}

func (f *fakeBackuper) DueBackups(context.Context, time.Time) ([]lifecycle.DueBackup, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looks++
	return []lifecycle.DueBackup{{App: "blog", Service: "db"}, {App: "shop", Service: "db"}}, nil
}

func (f *fakeBackuper) Backup(_ context.Context, app, service string) (*oprun.OpResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, app+"/"+service)
	if f.fail {
		return nil, errors.New("disk full")
	}
	return &oprun.OpResult{Op: core.Operation{ID: "op-1"}}, nil
}

func (f *fakeBackuper) count() (runs, looks int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.runs), f.looks
}

// The watcher runs each due backup of its apps at every tick; a failed one
// is not retried at the next tick (its service would be stopped again and
// again) but after a wait.
func TestBackups_WatcherRunsDueBackupsAndWaitsBeforeRetryingAFailure(t *testing.T) {
	defer func(d time.Duration) { BackupTick = d }(BackupTick)
	BackupTick = 5 * time.Millisecond
	o := Options{Apps: []string{"blog"}, Log: hclog.NewNullLogger()}

	ok := &fakeBackuper{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.runBackups(ctx, ok, func() bool { return false }); close(done) }()
	require.Eventually(t, func() bool { n, _ := ok.count(); return n >= 3 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	assert.NotContains(t, ok.runs, "shop/db", "only the watcher's apps")

	failing := &fakeBackuper{fail: true}
	ctx, cancel = context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() { o.runBackups(ctx, failing, func() bool { return false }); close(done) }()
	require.Eventually(t, func() bool { _, looks := failing.count(); return looks >= 20 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	runs, _ := failing.count()
	assert.Equal(t, 1, runs, "20 ticks, one attempt: no retry before the wait")
}

// A watcher given no app (an empty list, as `reconcile --watch` with no
// argument passes, and as edge start and system start run it) takes the
// backups of every app.
func TestBackups_AWatcherOfEveryAppTakesEveryAppsBackups(t *testing.T) {
	defer func(d time.Duration) { BackupTick = d }(BackupTick)
	BackupTick = 5 * time.Millisecond
	o := Options{Apps: []string{}, Log: hclog.NewNullLogger()}
	f := &fakeBackuper{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.runBackups(ctx, f, func() bool { return false }); close(done) }()
	require.Eventually(t, func() bool { n, _ := f.count(); return n >= 2 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Contains(t, f.runs, "blog/db")
	assert.Contains(t, f.runs, "shop/db")
}
