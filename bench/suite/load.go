package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// loader is the deploy-under-load client: N keep-alive HTTP/1.1 clients in
// a closed loop (the next request when the previous answered), like
// test/e2e's loader. A failure is a transport error or a non-2xx answer; a
// failing client waits 10 ms before retrying, so a dead port is not
// hammered (the count is then "failed attempts", bounded by clients ×
// gap / 10 ms). It also tracks the longest interval during which no client
// got a successful response. (edgebench's generator in bench/edge is a
// package main, so it cannot be imported, and it stops counting nothing
// but errors; this one needs the gap.)
type loader struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	ok, failed atomic.Int64
	lastOK     atomic.Int64 // unix nanos of the latest success
	maxGap     atomic.Int64 // nanos

	mu   sync.Mutex
	lat  []time.Duration
	errs []string
	t0   time.Time
}

type loadStats struct {
	Requests int64         `json:"requests"`
	OK       int64         `json:"ok"`
	Failed   int64         `json:"failed"`
	MaxGap   time.Duration `json:"longest_gap_ns"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Errors   []string      `json:"first_errors,omitempty"`
}

func startLoader(url, host string, clients int) *loader {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loader{cancel: cancel, t0: time.Now()}
	l.lastOK.Store(time.Now().UnixNano())
	for range clients {
		l.wg.Add(1)
		go l.client(ctx, url, host)
	}
	return l
}

func (l *loader) client(ctx context.Context, url, host string) {
	defer l.wg.Done()
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1,
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	lat := make([]time.Duration, 0, 1<<14)
	defer func() {
		l.mu.Lock()
		l.lat = append(l.lat, lat...)
		l.mu.Unlock()
	}()
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Host = host
		t0 := time.Now()
		resp, err := c.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
				err = &statusError{resp.StatusCode}
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			l.failed.Add(1)
			l.note(err.Error())
			time.Sleep(10 * time.Millisecond)
			continue
		}
		now := time.Now()
		lat = append(lat, now.Sub(t0))
		l.ok.Add(1)
		prev := l.lastOK.Swap(now.UnixNano())
		if gap := now.UnixNano() - prev; gap > 0 {
			for {
				cur := l.maxGap.Load()
				if gap <= cur || l.maxGap.CompareAndSwap(cur, gap) {
					break
				}
			}
		}
	}
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + http.StatusText(e.code) }

func (l *loader) note(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 5 && !slices.Contains(l.errs, s) {
		l.errs = append(l.errs, s)
	}
}

// Stop ends the run and returns its statistics.
func (l *loader) Stop() loadStats {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := loadStats{OK: l.ok.Load(), Failed: l.failed.Load(), MaxGap: time.Duration(l.maxGap.Load()), Elapsed: time.Since(l.t0), Errors: l.errs}
	s.Requests = s.OK + s.Failed
	s.P50, s.P99 = percentile(l.lat, 50), percentile(l.lat, 99)
	return s
}
