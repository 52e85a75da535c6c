package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// TCPConfig is a StartTCP run: Dialers goroutines that each connect to
// Addr (DialTimeout, default 2 s), write "ping\n", read one line within
// ReadTimeout (default 3 s) and close, back to back, with no pause.
type TCPConfig struct {
	Addr        string
	Dialers     int
	DialTimeout time.Duration
	ReadTimeout time.Duration
	// Interval paces each dialer: its dials start at least Interval
	// apart (0: back to back). Every relayed connection leaves the edge's
	// side of its upstream in TIME_WAIT for 60 s, and toward one backend
	// address Linux has about 28,000 ephemeral ports (tcp_tw_reuse
	// covers loopback only), so unpaced dialers (about 1,000 dials/s)
	// exhaust them within a minute and the edge's connects then fail.
	Interval time.Duration
	Bounds
}

// TCPStats is what a TCP run counted. Refused connects (the dial failed)
// and broken exchanges (connected, then no answer line) are apart.
type TCPStats struct {
	Dials, Refused, Broken int64
	Bounded                bool
}

// TCPRun is a running StartTCP.
type TCPRun struct {
	cancel                 context.CancelFunc
	wg                     sync.WaitGroup
	dials, refused, broken atomic.Int64
	bounded                atomic.Bool
}

// StartTCP starts the dialers; it fails only for a non-loopback Addr.
func StartTCP(cfg TCPConfig) (*TCPRun, error) {
	if err := CheckLoopback(cfg.Addr); err != nil {
		return nil, err
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 3 * time.Second
	}
	b := cfg.Bounds.withDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), b.MaxDuration)
	r := &TCPRun{cancel: cancel}
	for range cfg.Dialers {
		r.wg.Add(1)
		go r.dialer(ctx, cfg, b.MaxRequests)
	}
	return r, nil
}

func (r *TCPRun) dialer(ctx context.Context, cfg TCPConfig, maxDials int64) {
	defer r.wg.Done()
	var tick *time.Ticker
	if cfg.Interval > 0 {
		tick = time.NewTicker(cfg.Interval)
		defer tick.Stop()
	}
	for n := int64(0); ctx.Err() == nil; n++ {
		if n >= maxDials {
			r.bounded.Store(true)
			return
		}
		if tick != nil && n > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				continue
			}
		}
		c, err := net.DialTimeout("tcp", cfg.Addr, cfg.DialTimeout)
		r.dials.Add(1)
		if err != nil {
			r.refused.Add(1)
			continue
		}
		_, _ = fmt.Fprintln(c, "ping")
		_ = c.SetReadDeadline(time.Now().Add(cfg.ReadTimeout))
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			r.broken.Add(1)
		}
		c.Close()
	}
	if ctx.Err() == context.DeadlineExceeded {
		r.bounded.Store(true)
	}
}

// Stop ends the run (waiting for the exchanges in flight, which count)
// and returns its counts.
func (r *TCPRun) Stop() TCPStats {
	r.cancel()
	r.wg.Wait()
	return TCPStats{Dials: r.dials.Load(), Refused: r.refused.Load(), Broken: r.broken.Load(), Bounded: r.bounded.Load()}
}
