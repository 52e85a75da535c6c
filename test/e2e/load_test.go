package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// loader is a closed-loop HTTP load generator: N keep-alive clients, each
// sending requests back to back through the edge, counting every failure.
// It also checks that each client's sequence of serving instances never
// goes back to an instance it already left (no client ever sees the older
// generation again after it saw the newer one).
type loader struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	requests   atomic.Int64
	transport  atomic.Int64
	non2xx     atomic.Int64
	regression atomic.Int64

	mu        sync.Mutex
	latencies []time.Duration
	firstErrs []string
}

// loadStats is what a load run measured.
type loadStats struct {
	Requests, TransportErrors, Non2xx, Regressions int64
	P50, P99, Max                                  time.Duration
	Errors                                         []string
}

func (s loadStats) String() string {
	return fmt.Sprintf("requests=%d transport_errors=%d non2xx=%d regressions=%d p50=%s p99=%s max=%s",
		s.Requests, s.TransportErrors, s.Non2xx, s.Regressions, s.P50, s.P99, s.Max)
}

// startLoad starts clients against url with the Host header host. instance
// extracts the serving instance's identity from a response body.
func startLoad(url, host string, clients int, instance func(body []byte) string) *loader {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loader{cancel: cancel}
	for i := 0; i < clients; i++ {
		l.wg.Add(1)
		go l.client(ctx, url, host, instance)
	}
	return l
}

func (l *loader) client(ctx context.Context, url, host string, instance func([]byte) string) {
	defer l.wg.Done()
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1,
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	left := map[string]bool{}
	current := ""
	var lat []time.Duration
	defer func() {
		l.mu.Lock()
		l.latencies = append(l.latencies, lat...)
		l.mu.Unlock()
	}()
	for ctx.Err() == nil {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Host = host
		t0 := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.transport.Add(1)
			l.noteErr(err.Error())
			time.Sleep(10 * time.Millisecond)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(t0))
		l.requests.Add(1)
		if err != nil {
			l.transport.Add(1)
			l.noteErr("read body: " + err.Error())
			continue
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			l.non2xx.Add(1)
			l.noteErr(fmt.Sprintf("status %d: %.200s", resp.StatusCode, body))
			continue
		}
		if instance != nil {
			id := instance(body)
			if id != current {
				if left[id] {
					l.regression.Add(1)
					l.noteErr("client went back to instance " + id)
				}
				if current != "" {
					left[current] = true
				}
				current = id
			}
		}
	}
}

func (l *loader) noteErr(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.firstErrs) < 10 {
		l.firstErrs = append(l.firstErrs, s)
	}
}

// Stop ends the run and returns its statistics.
func (l *loader) Stop() loadStats {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := loadStats{
		Requests: l.requests.Load(), TransportErrors: l.transport.Load(),
		Non2xx: l.non2xx.Load(), Regressions: l.regression.Load(), Errors: l.firstErrs,
	}
	if n := len(l.latencies); n > 0 {
		sort.Slice(l.latencies, func(i, j int) bool { return l.latencies[i] < l.latencies[j] })
		s.P50 = l.latencies[n/2]
		s.P99 = l.latencies[n*99/100]
		s.Max = l.latencies[n-1]
	}
	return s
}

// Snapshot returns the counters so far without stopping.
func (l *loader) Snapshot() (requests, failures int64) {
	return l.requests.Load(), l.transport.Load() + l.non2xx.Load()
}
