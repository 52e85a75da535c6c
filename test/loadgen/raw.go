package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"
)

// RawConfig is a RunRaw run: Conns connections to Addr (or from Dial,
// e.g. TLS, which must reach Addr) sending "GET / HTTP/1.1" with Host for
// Duration, each the next request when the previous response was read.
// With OneShot every request goes on a new connection (Connection:
// close), so the figure is connections (TLS handshakes) per second.
type RawConfig struct {
	Addr     string
	Dial     func() (net.Conn, error)
	Host     string
	Conns    int
	Duration time.Duration
	OneShot  bool
	Bounds
}

// RawResult is one raw run: completed requests, errors (a failed dial,
// write or response; a failed dial pauses 10 ms), wall time and latency
// percentiles.
type RawResult struct {
	Requests int64
	Errors   int64
	Elapsed  time.Duration
	P50, P99 time.Duration
	// samples are the sorted request latencies (for MergeRaw).
	samples []time.Duration
}

// RPS is completed requests per second.
func (r RawResult) RPS() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// MergeRaw combines runs of one target: requests, errors and elapsed time
// add up, percentiles are over every request of every run.
func MergeRaw(runs []RawResult) RawResult {
	var m RawResult
	var all [][]time.Duration
	for _, r := range runs {
		m.Requests += r.Requests
		m.Errors += r.Errors
		m.Elapsed += r.Elapsed
		all = append(all, r.samples)
	}
	m.samples = slices.Concat(all...)
	slices.Sort(m.samples)
	m.P50, m.P99 = percentile(m.samples, 50), percentile(m.samples, 99)
	return m
}

// RunRaw drives the target as cfg says and returns throughput and
// latency percentiles. It speaks raw HTTP/1.1 over net.Conn so the
// generator itself costs little CPU; responses must be 200 with a
// Content-Length. Errors: a non-loopback Addr, a Duration over
// MaxDuration, or no request completed.
func RunRaw(cfg RawConfig) (RawResult, error) {
	if err := CheckLoopback(cfg.Addr); err != nil {
		return RawResult{}, err
	}
	b := cfg.Bounds.withDefaults()
	if cfg.Duration <= 0 || cfg.Duration > b.MaxDuration {
		return RawResult{}, fmt.Errorf("loadgen: duration %s outside (0, %s]", cfg.Duration, b.MaxDuration)
	}
	dial := cfg.Dial
	if dial == nil {
		dial = func() (net.Conn, error) { return net.Dial("tcp", cfg.Addr) }
	}
	req := []byte("GET / HTTP/1.1\r\nHost: " + cfg.Host + "\r\nUser-Agent: gordon-bench\r\n\r\n")
	if cfg.OneShot {
		req = []byte("GET / HTTP/1.1\r\nHost: " + cfg.Host + "\r\nUser-Agent: gordon-bench\r\nConnection: close\r\n\r\n")
	}
	deadline := time.Now().Add(cfg.Duration)
	lat := make([][]time.Duration, cfg.Conns)
	errs := make([]int64, cfg.Conns)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cfg.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat[i], errs[i] = rawConn(dial, req, deadline, cfg.OneShot, b.MaxRequests)
		}()
	}
	wg.Wait()
	res := RawResult{Elapsed: time.Since(start)}
	all := slices.Concat(lat...)
	for _, e := range errs {
		res.Errors += e
	}
	res.Requests = int64(len(all))
	if len(all) == 0 {
		return res, errors.New("no request completed")
	}
	slices.Sort(all)
	res.P50, res.P99 = percentile(all, 50), percentile(all, 99)
	res.samples = all
	return res, nil
}

// rawConn is one connection's closed loop until deadline (or maxReqs
// attempts): its latency samples and error count.
func rawConn(dial func() (net.Conn, error), req []byte, deadline time.Time, oneShot bool, maxReqs int64) ([]time.Duration, int64) {
	samples := make([]time.Duration, 0, 1<<16)
	var errs int64
	var c net.Conn
	var br *bufio.Reader
	for n := int64(0); n < maxReqs && time.Now().Before(deadline); n++ {
		t0 := time.Now()
		if c == nil {
			var err error
			c, err = dial()
			if err != nil {
				errs++
				time.Sleep(10 * time.Millisecond)
				continue
			}
			br = bufio.NewReaderSize(c, 16<<10)
		}
		if _, err := c.Write(req); err != nil {
			errs++
			_ = c.Close()
			c = nil
			continue
		}
		if err := readResponse(br); err != nil {
			errs++
			_ = c.Close()
			c = nil
			continue
		}
		samples = append(samples, time.Since(t0))
		if oneShot {
			_ = c.Close()
			c = nil
		}
	}
	if c != nil {
		_ = c.Close()
	}
	return samples, errs
}

var contentLength = []byte("content-length:")

// readResponse reads one HTTP/1.1 response with a 200 status and a
// Content-Length body, discarding the body.
func readResponse(br *bufio.Reader) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 200")) {
		return fmt.Errorf("unexpected status line %q", line)
	}
	n := -1
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > len(contentLength) && bytes.EqualFold(line[:len(contentLength)], contentLength) {
			v := bytes.TrimSpace(line[len(contentLength):])
			n, err = strconv.Atoi(string(v))
			if err != nil {
				return fmt.Errorf("bad content-length %q", v)
			}
		}
	}
	if n < 0 {
		return errors.New("response without Content-Length")
	}
	_, err = br.Discard(n)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return err
}
