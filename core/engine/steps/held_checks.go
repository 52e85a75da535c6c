package steps

import (
	"context"
	"sync"

	"github.com/gordon-deploy/docker-gordon/core"
)

// HeldChecks memoizes the checks of one hold of an app lock, so a deploy
// asks the edge's status, reads each secret, resolves each image and reads
// the bind policy once. Engine.Lock creates it with the Hold; the flow
// that holds the lock passes it down as a value (deployRun.checks,
// LifecycleRun.Checks; through Submission.Prepare's context, WithHeld), so
// nothing is remembered across ops or across the lock, and a step given
// nil (a verb that holds no lock) checks afresh every time.
//
// Memoized: the edge's Status as a pre-change check (checkTraffic,
// RequireLiveTraffic; never the drain's or the monitor's in-flight polls),
// secret values read (not failures), bind policy answers (not refusals),
// image resolutions (forgotten when the image is pulled).
type HeldChecks struct {
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

// Hold is one hold of an app lock (Engine.Lock) and the memo of its
// checks. The flow that took the lock passes Checks down to every step
// that asks a check (nil: ask afresh); the memo ends with the hold.
type Hold struct {
	core.AppLock
	Checks *HeldChecks

	e    *Engine
	app  string
	once sync.Once
}

// Unlock applies the retention (pruneHeld) once, then releases the lock.
func (h *Hold) Unlock() error {
	h.once.Do(func() {
		if h.e != nil {
			h.e.pruneHeld(h.app)
		}
	})
	return h.AppLock.Unlock()
}

// hold wraps lk (just acquired) with a fresh memo of checks; its Unlock
// applies e's retention to app first.
func hold(e *Engine, app string, lk core.AppLock) *Hold {
	return &Hold{AppLock: lk, Checks: &HeldChecks{secrets: map[string][]byte{}, binds: map[string]string{}, resolved: map[string]core.ImageRef{}},
		e: e, app: app}
}

type heldKey struct{}

// WithHeld is ctx carrying c, for the one place a flow hands control to
// its caller under the lock (Submission.Prepare) and the caller calls the
// engine back (CheckImages, CheckDeployable).
func WithHeld(ctx context.Context, c *HeldChecks) context.Context {
	return context.WithValue(ctx, heldKey{}, c)
}

// HeldOf is the memo WithHeld put in ctx (nil: none, ask afresh).
func HeldOf(ctx context.Context) *HeldChecks {
	c, _ := ctx.Value(heldKey{}).(*HeldChecks)
	return c
}

// trafficStatus is Traffic.Status as a check: asked once per lock hold.
func (e *Engine) TrafficStatus(ctx context.Context, c *HeldChecks) (core.TrafficStatus, error) {
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
func (c *HeldChecks) setStatus(st core.TrafficStatus, err error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.status = &statusAnswer{st: st, err: err}
	c.mu.Unlock()
}

// secret returns a remembered secret value.
func (c *HeldChecks) secret(service, name string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.secrets[service+"\x00"+name]
	return v, ok
}

func (c *HeldChecks) setSecret(service, name string, v []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.secrets[service+"\x00"+name] = v
	c.mu.Unlock()
}

// bindPath returns a remembered bind policy answer.
func (c *HeldChecks) BindPath(name string) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.binds[name]
	return p, ok
}

func (c *HeldChecks) SetBindPath(name, path string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.binds[name] = path
	c.mu.Unlock()
}

// resolveImage is Runtime.ResolveImage, asked once per lock hold per ref
// (until the ref is pulled: forgetImage).
func (e *Engine) ResolveImage(ctx context.Context, c *HeldChecks, ref string) (core.ImageRef, error) {
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
func (e *Engine) ForgetImage(c *HeldChecks, ref string) {
	if c != nil {
		c.mu.Lock()
		delete(c.resolved, ref)
		c.mu.Unlock()
	}
}
