package dashboard

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// The app page lists the app's volume snapshots (newest first) and its
// scheduled jobs with their last and next run, each with the command of
// the next action.
func TestAppPage_ShowsSnapshotsAndJobs(t *testing.T) {
	f := newFixture(t)
	f.seedApp("blog", 1)
	ctx := context.Background()
	rev, err := f.store.LoadRevision(ctx, "blog", "rev-1")
	require.NoError(t, err)
	rev.ID = "rev-2"
	rev.Spec.Jobs = []core.JobSpec{{Name: "nightly", Service: "web", Schedule: "@every 1h", Command: []string{"/app", "cleanup"}}}
	require.NoError(t, f.store.SaveRevision(ctx, rev))
	active, err := f.store.LoadActive(ctx, "blog")
	require.NoError(t, err)
	active.ConvergedRevision = "rev-2"
	require.NoError(t, f.store.SaveActive(ctx, active))

	snaps := snapshot.Open(f.dir)
	for i, svc := range []string{"web", "web"} {
		m := snapshot.Manifest{ID: snaps.NewID(svc), App: "blog", Service: svc, Trigger: "deploy", Revision: "rev-1", CreatedAt: time.Now().Add(time.Duration(i) * time.Second)}
		w, err := snaps.Begin(m)
		require.NoError(t, err)
		v, err := w.AddVolume("gordon-blog-data", "/data", func(out io.Writer) error {
			_, err := io.Copy(out, strings.NewReader(strings.Repeat("x", 1<<20)))
			return err
		})
		require.NoError(t, err)
		m.Volumes = []snapshot.Volume{v}
		_, err = w.Commit(m)
		require.NoError(t, err)
	}

	secs, err := DataSections(f.store, snaps)(ctx, "blog")
	require.NoError(t, err)
	require.Len(t, secs, 2)
	assert.Equal(t, "Snapshots", secs[0].Title)
	require.Len(t, secs[0].Rows, 2)
	assert.Greater(t, secs[0].Rows[0][0], secs[0].Rows[1][0], "newest first")
	assert.Equal(t, "gordon-blog-data", secs[0].Rows[0][5])
	assert.Equal(t, "rollback blog --with-data", secs[0].Command)
	assert.Equal(t, "Jobs", secs[1].Title)
	require.Len(t, secs[1].Rows, 1)
	assert.Equal(t, []string{"nightly", "web", "@every 1h", "-", "-"}, secs[1].Rows[0][:5])
	assert.NotEqual(t, "-", secs[1].Rows[0][5], "the next run is known")

	f.sections = nil
	c := f.collector()
	c.Sections = DataSections(f.store, snaps)
	snap, err := c.Collect(ctx)
	require.NoError(t, err)
	var page *App
	for i := range snap.Apps {
		if snap.Apps[i].Status.App == "blog" {
			page = &snap.Apps[i]
		}
	}
	require.NotNil(t, page)
	assert.Len(t, page.Sections, 2)

	none, err := DataSections(f.store, snaps)(ctx, "wiki")
	require.NoError(t, err, "an unknown app has no snapshot and no job, not an error")
	assert.Empty(t, none[0].Rows)
	assert.Empty(t, none[1].Rows)
}
