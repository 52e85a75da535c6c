package journal

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TryLockJob is the run lock of app's job (core/engine/jobs.RunLocker): an flock on
// apps/<app>/jobs/<job>/lock, held for one run of the job, with
// lock.json beside it naming the holder. The kernel drops it when the
// holder's process dies, so a run cut short by a crash holds nothing.
func (s *Store) TryLockJob(ctx context.Context, app, job string, holder core.LockHolder) (core.AppLock, bool, error) {
	if err := validNames("app", app, "job", job); err != nil {
		return nil, false, err
	}
	l, ok, err := s.tryLock(filepath.Join(s.appDir(app), "jobs", job), holder)
	if err != nil {
		return nil, false, fmt.Errorf("app %s job %s: %w", app, job, err)
	}
	return l, ok, nil
}
