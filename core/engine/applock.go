package engine

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// WithAppLock runs fn holding app's lock in store as holder (writers of
// one app hold it), waiting at most timeout (0: 60 s) for it. A busy lock
// is said at once on wait, naming its holder (LockWaitText). A lock not
// had in time is an error naming the app.
func WithAppLock(ctx context.Context, store core.Store, app string, holder core.LockHolder, timeout time.Duration, wait io.Writer, fn func() error) error {
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lk, ok, err := store.TryLock(lctx, app, holder)
	if err == nil && !ok {
		h, herr := store.LockHolder(ctx, app)
		fmt.Fprintln(wait, LockWaitText(app, holder.Verb, h, herr, timeout))
		lk, err = store.Lock(lctx, app, holder)
	}
	if err != nil {
		return fmt.Errorf("app %s: %w", app, err)
	}
	defer lk.Unlock()
	return fn()
}
