package steps

import (
	"context"
	"sync"

	"github.com/gordon-deploy/docker-gordon/core"
)

// heldChecks memoizes the checks of one hold of an app lock (issue 24
// item 6: a deploy asked the edge's status, read each secret, resolved each
// image and read the bind policy several times). It is created when
// Engine.lock acquires the app lock and dropped when that lock is
// released: nothing is remembered across ops or across the lock, and a
// verb that holds no lock checks afresh every time.
//
// Memoized: the edge's Status as a pre-change check (checkTraffic,
// RequireLiveTraffic; never the drain's or the monitor's in-flight polls),
// secret values read (not failures), bind policy answers (not refusals),
// image resolutions (forgotten when the image is pulled).
type heldChecks struct {
	mu       sync.Mutex
	status   *statusAnswer
	secrets  map[string][]byte
	binds    map[string]string
	resolved map[string]core.ImageRef
}

type statusAnswer struct {
	st  core.TrafficStatus
	err error
}

// heldLock releases the app lock and drops its heldChecks.
type heldLock struct {
	core.AppLock
	e    *Engine
	app  string
	memo *heldChecks
	once sync.Once
}

// Unlock applies the retention (pruneHeld) and drops the memo, then
// releases the lock.
func (l *heldLock) Unlock() error {
	l.once.Do(func() {
		l.e.pruneHeld(l.app)
		l.e.heldMu.Lock()
		if l.e.held[l.app] == l.memo {
			delete(l.e.held, l.app)
		}
		l.e.heldMu.Unlock()
	})
	return l.AppLock.Unlock()
}

// hold starts app's heldChecks for lk (just acquired) and returns lk
// wrapped so that its Unlock drops them.
func (e *Engine) hold(app string, lk core.AppLock) core.AppLock {
	memo := &heldChecks{secrets: map[string][]byte{}, binds: map[string]string{}, resolved: map[string]core.ImageRef{}}
	e.heldMu.Lock()
	if e.held == nil {
		e.held = map[string]*heldChecks{}
	}
	e.held[app] = memo
	e.heldMu.Unlock()
	return &heldLock{AppLock: lk, e: e, app: app, memo: memo}
}

// checks returns app's heldChecks while this engine holds its lock, else
// nil (every method of a nil *heldChecks asks afresh).
func (e *Engine) Checks(app string) *heldChecks {
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	return e.held[app]
}

// trafficStatus is Traffic.Status as a check: asked once per lock hold.
func (e *Engine) TrafficStatus(ctx context.Context, app string) (core.TrafficStatus, error) {
	c := e.Checks(app)
	if c != nil {
		c.mu.Lock()
		a := c.status
		c.mu.Unlock()
		if a != nil {
			return a.st, a.err
		}
	}
	st, err := e.Traffic.Status(ctx)
	c.setStatus(st, err)
	return st, err
}

// setStatus remembers a Status answer (no-op on nil).
func (c *heldChecks) setStatus(st core.TrafficStatus, err error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.status = &statusAnswer{st: st, err: err}
	c.mu.Unlock()
}

// secret returns a remembered secret value.
func (c *heldChecks) secret(service, name string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.secrets[service+"\x00"+name]
	return v, ok
}

func (c *heldChecks) setSecret(service, name string, v []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.secrets[service+"\x00"+name] = v
	c.mu.Unlock()
}

// bindPath returns a remembered bind policy answer.
func (c *heldChecks) BindPath(name string) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.binds[name]
	return p, ok
}

func (c *heldChecks) SetBindPath(name, path string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.binds[name] = path
	c.mu.Unlock()
}

// resolveImage is Runtime.ResolveImage, asked once per lock hold per ref
// (until the ref is pulled: forgetImage).
func (e *Engine) ResolveImage(ctx context.Context, app, ref string) (core.ImageRef, error) {
	c := e.Checks(app)
	if c != nil {
		c.mu.Lock()
		img, ok := c.resolved[ref]
		c.mu.Unlock()
		if ok {
			return img, nil
		}
	}
	img, err := e.Runtime.ResolveImage(ctx, ref)
	if err == nil && c != nil {
		c.mu.Lock()
		c.resolved[ref] = img
		c.mu.Unlock()
	}
	return img, err
}

// forgetImage drops ref's remembered resolution (it is being pulled).
func (e *Engine) ForgetImage(app, ref string) {
	if c := e.Checks(app); c != nil {
		c.mu.Lock()
		delete(c.resolved, ref)
		c.mu.Unlock()
	}
}
