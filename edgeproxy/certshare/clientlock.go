package certshare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Lock takes lock name on the server, waiting while another client (or
// another caller of this one) holds it, until ctx ends (its error is
// returned). Once taken, the lease is renewed in the background every
// third of its TTL until Unlock.
func (c *Client) Lock(ctx context.Context, name string) error {
	for {
		b, err := c.do(ctx, http.MethodPost, "/v1/lock", url.Values{"name": {name}}, nil)
		if err == nil {
			var rep lockReply
			if err := json.Unmarshal(b, &rep); err != nil || rep.Lease == "" {
				return fmt.Errorf("certshare: lock %s: bad reply %q", name, b)
			}
			c.startRenewing(name, rep)
			return nil
		}
		var se *statusError
		if errors.As(err, &se) && se.code == http.StatusConflict && ctx.Err() == nil {
			continue // still held after the server's wait: ask again
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("certshare: lock %s: %w", name, err)
	}
}

// startRenewing records the lease of name and renews it every third of
// its TTL (at least every 10 ms) until Unlock, or until the server says
// it is lost.
func (c *Client) startRenewing(name string, rep lockReply) {
	every := max(time.Duration(rep.TTLms)*time.Millisecond/3, 10*time.Millisecond)
	ctx, stop := context.WithCancel(context.Background())
	h := &heldLock{lease: rep.Lease, stop: stop, done: make(chan struct{})}
	c.mu.Lock()
	c.held[name] = h
	c.mu.Unlock()
	go func() {
		defer close(h.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				err := c.renew(ctx, name, h.lease)
				var se *statusError
				if errors.As(err, &se) && se.code == http.StatusConflict {
					return // lost: nothing left to renew
				}
			}
		}
	}()
}

func (c *Client) renew(ctx context.Context, name, lease string) error {
	_, err := c.do(ctx, http.MethodPost, "/v1/renew", url.Values{"name": {name}, "lease": {lease}}, nil)
	return err
}

// Unlock releases lock name, which this client must hold (an error
// otherwise, and when the server reports the lease lost: it lapsed, so
// another client may have taken the name meanwhile).
func (c *Client) Unlock(ctx context.Context, name string) error {
	c.mu.Lock()
	h := c.held[name]
	delete(c.held, name)
	c.mu.Unlock()
	if h == nil {
		return fmt.Errorf("certshare: unlock %s: not held by this client", name)
	}
	h.stop()
	<-h.done
	if _, err := c.do(ctx, http.MethodPost, "/v1/unlock", url.Values{"name": {name}, "lease": {h.lease}}, nil); err != nil {
		return fmt.Errorf("certshare: unlock %s: %w", name, err)
	}
	return nil
}

// RenewLockLease renews the lease of lock name now (certmagic calls it
// before each obtain attempt; the background renewal keeps it anyway).
// The lease keeps the server's TTL: leaseDuration is not used.
func (c *Client) RenewLockLease(ctx context.Context, name string, _ time.Duration) error {
	c.mu.Lock()
	h := c.held[name]
	c.mu.Unlock()
	if h == nil {
		return fmt.Errorf("certshare: renew %s: not held by this client", name)
	}
	if err := c.renew(ctx, name, h.lease); err != nil {
		return fmt.Errorf("certshare: renew %s: %w", name, err)
	}
	return nil
}
