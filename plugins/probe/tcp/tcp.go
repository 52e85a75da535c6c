// Package tcpprobe is the built-in "tcp" readiness backend (SPEC R32): one
// connect-and-settle attempt per Check against the target's loopback bind.
// The engine (core/engine's ReadinessWaiter) owns retries and the budget (R33).
package tcpprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Defaults of one attempt (SPEC §4).
const (
	// DefaultSettle is the settle window: how long an open, silent
	// connection must stay open to count as ready (R32.2, R32.5).
	DefaultSettle = 300 * time.Millisecond
	// ConnectTimeout bounds the connect (R32.1); the caller's context
	// bounds it too.
	ConnectTimeout = 2 * time.Second
	// Protocol is the probe plugin protocol version this backend speaks.
	Protocol = 1
)

// ErrClosedAfterAccept is the dedicated, matchable not-ready error of an
// attempt whose connection reached end-of-stream (or a zero-byte read
// without error) right after accept (R32.6): rootless/userland port relays
// accept on behalf of a container that is not listening yet, then close.
// Attempt returns it (match with errors.Is); Check puts its text in
// ProbeResult.Detail, which crosses the plugin wire and is matched there
// with core.IsClosedAfterAccept.
var ErrClosedAfterAccept = errors.New("connection closed right after accept")

// Prober is the tcp readiness backend. Its zero value is not usable; build
// it with New or NewWithSettle.
type Prober struct {
	settle time.Duration
}

// Interface guard.
var _ core.Prober = (*Prober)(nil)

// New returns the tcp prober with the 300 ms settle window (R32).
func New() core.Prober { return &Prober{settle: DefaultSettle} }

// NewWithSettle returns a tcp prober with settle window d (tests use a
// long window to show banners return at once, S37, S40). d <= 0 means the
// default 300 ms.
func NewWithSettle(d time.Duration) *Prober {
	if d <= 0 {
		d = DefaultSettle
	}
	return &Prober{settle: d}
}

// Describe returns name "tcp", protocol 1.
func (p *Prober) Describe(ctx context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: core.ReadinessTCP, Protocol: Protocol}, nil
}

// ValidateConfig accepts only an empty config (absent, null or {}).
func (p *Prober) ValidateConfig(ctx context.Context, config json.RawMessage) ([]string, error) {
	return validateEmpty("tcp", config), nil
}

// Check makes one R32 attempt against req.Target.Address. Ready when a
// byte arrived or the settle window passed with the connection open. A
// not-ready verdict is (ProbeResult{Ready:false, Detail}, nil) where Detail
// is "<addr>: connection closed right after accept" (R32.6), the connect
// error or the read error. When ctx ends during the attempt, ctx's error is
// returned as is, even if data arrived (R32.3). An empty address is an
// error wrapping core.ErrInvalid.
func (p *Prober) Check(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
	if err := ctx.Err(); err != nil {
		return core.ProbeResult{}, err
	}
	addr := req.Target.Address
	if addr == "" {
		return core.ProbeResult{}, fmt.Errorf("%w: tcp probe of app %s service %s container %s: no loopback address to dial",
			core.ErrInvalid, req.Target.App, req.Target.Service, req.Target.ContainerID)
	}
	settle := p.settle
	if settle <= 0 {
		settle = DefaultSettle
	}
	err := Attempt(ctx, addr, settle)
	switch {
	case err == nil:
		return core.ProbeResult{Ready: true, Detail: "connected to " + addr}, nil
	case ctx.Err() != nil:
		return core.ProbeResult{}, ctx.Err()
	default:
		return core.ProbeResult{Ready: false, Detail: err.Error()}, nil
	}
}

// Attempt is one R32 attempt on addr with the given settle window: nil
// when ready; ctx's error as is when ctx ended (even if data arrived);
// an error wrapping ErrClosedAfterAccept on end-of-stream right after
// accept; otherwise the connect or read error, naming addr. The
// connection is always closed.
func Attempt(ctx context.Context, addr string, settle time.Duration) error {
	d := net.Dialer{Timeout: ConnectTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("connect %s: %w", addr, err)
	}
	defer conn.Close()

	if err := conn.SetReadDeadline(time.Now().Add(settle)); err != nil {
		return fmt.Errorf("%s: set read deadline: %w", addr, err)
	}
	// A caller context ending interrupts the wait at once (R32.2): move the
	// deadline into the past, which wakes the blocked Read.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	var buf [1]byte
	n, rerr := conn.Read(buf[:])
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if n >= 1 {
		return nil // banner protocol (R32.4)
	}
	var ne net.Error
	switch {
	case rerr == nil || errors.Is(rerr, io.EOF):
		return fmt.Errorf("%s: %w", addr, ErrClosedAfterAccept)
	case errors.As(rerr, &ne) && ne.Timeout():
		return nil // silent protocol, still open after the window (R32.5)
	default:
		return fmt.Errorf("read %s: %w", addr, rerr)
	}
}

// validateEmpty reports a non-empty config of a built-in probe.
func validateEmpty(name string, config json.RawMessage) []string {
	if len(config) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(config, &m); err != nil {
		return []string{fmt.Sprintf("%s probe: config is not a JSON object: %v", name, err)}
	}
	if len(m) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s probe takes no config (got %d keys)", name, len(m))}
}
