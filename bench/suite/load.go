package main

import (
	"time"

	"github.com/gordon-deploy/docker-gordon/test/loadgen"
)

// loadStats is one deploy-under-load run as the report shows it. A
// failure is a transport error or a non-2xx answer; a failing client waits
// 10 ms before retrying, so a dead port is not hammered (the count is then
// "failed attempts", bounded by clients × gap / 10 ms). MaxGap is the
// longest interval during which no client got a successful response.
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

// loader is the deploy-under-load client: clients keep-alive HTTP/1.1
// clients in a closed loop (test/loadgen, the generator test/e2e uses).
type loader struct{ run *loadgen.HTTPRun }

// startLoader starts the clients against url with Host host; it fails
// only for a target outside loopback.
func startLoader(url, host string, clients int) (*loader, error) {
	run, err := loadgen.StartHTTP(loadgen.HTTPConfig{URL: url, Host: host, Clients: clients,
		FailurePause: 10 * time.Millisecond, AbortOnStop: true, MaxErrors: 5, DistinctErrors: true})
	if err != nil {
		return nil, err
	}
	return &loader{run: run}, nil
}

// Stop ends the run (requests in flight are abandoned) and returns its
// statistics.
func (l *loader) Stop() loadStats {
	st := l.run.Stop()
	return loadStats{Requests: st.Requests(), OK: st.OK, Failed: st.Failed(), MaxGap: st.LongestGap,
		P50: st.P50, P99: st.P99, Elapsed: st.Elapsed, Errors: st.Errors}
}
