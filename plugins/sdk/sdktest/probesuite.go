package sdktest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// ProbeSuite checks the core.Prober contract (core/probe.go, SPEC R29–R32)
// against the probers newProbe returns, each test getting a fresh one:
// Describe names the probe; Check makes one bounded attempt (a closed
// loopback port is not ready, or an error, within AttemptTimeout plus a
// margin); a caller context that has ended makes Check return an error
// satisfying errors.Is with that context's error (R32.3).
//
// Run it directly and through the wire:
//
//	sdktest.ProbeSuite(t, func(t *testing.T) core.Prober { return sdktest.ServeProbe(t, tcpprobe.New()) })
func ProbeSuite(t *testing.T, newProbe func(t *testing.T) core.Prober) {
	t.Run("DescribeNamesTheProbe", func(t *testing.T) {
		p := newProbe(t)
		info, err := p.Describe(context.Background())
		if err != nil {
			t.Fatalf("Describe: %v", err)
		}
		if info.Name == "" {
			t.Fatalf("Describe: empty name in %+v", info)
		}
	})
	t.Run("R31_CheckIsOneBoundedAttempt", func(t *testing.T) {
		p := newProbe(t)
		addr := closedLoopbackAddr(t)
		req := core.ProbeRequest{
			Target:         core.ProbeTarget{App: "suite", Service: "web", ContainerID: "suite-container", Address: addr, Port: 8080, StartedAt: time.Now()},
			AttemptTimeout: 500 * time.Millisecond,
		}
		start := time.Now()
		res, err := p.Check(context.Background(), req)
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("Check took %s for one attempt against a closed port", took)
		}
		if err == nil && res.Ready {
			t.Fatalf("Check of closed port %s: ready, want not ready or an error", addr)
		}
	})
	t.Run("R32_3_EndedCallerContextIsReturned", func(t *testing.T) {
		p := newProbe(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := core.ProbeRequest{
			Target:         core.ProbeTarget{App: "suite", Service: "web", ContainerID: "suite-container", Address: closedLoopbackAddr(t), Port: 8080, StartedAt: time.Now()},
			AttemptTimeout: 500 * time.Millisecond,
		}
		_, err := p.Check(ctx, req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Check with a cancelled context: err = %v, want context.Canceled", err)
		}
	})
}

// closedLoopbackAddr returns a 127.0.0.1 address nothing listens on.
func closedLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
