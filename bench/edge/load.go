package main

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

// loadResult is one closed-loop run against one target.
type loadResult struct {
	Requests int64
	Errors   int64
	Elapsed  time.Duration
	P50, P99 time.Duration
	// samples are the sorted request latencies (for mergeResults).
	samples []time.Duration
}

// mergeResults combines runs of one target: requests, errors and elapsed
// time add up, percentiles are over every request of every run.
func mergeResults(runs []loadResult) loadResult {
	var m loadResult
	var all [][]time.Duration
	for _, r := range runs {
		m.Requests += r.Requests
		m.Errors += r.Errors
		m.Elapsed += r.Elapsed
		all = append(all, r.samples)
	}
	m.samples = slices.Concat(all...)
	slices.Sort(m.samples)
	if n := len(m.samples); n > 0 {
		m.P50 = m.samples[n*50/100]
		m.P99 = m.samples[min(n-1, n*99/100)]
	}
	return m
}

// RPS is completed requests per second.
func (r loadResult) RPS() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// runLoad drives addr with conns keep-alive HTTP/1.1 clients in a closed
// loop (each sends the next request when the previous response was read)
// for d, and returns throughput and latency percentiles. It speaks raw
// HTTP/1.1 over net.Conn so the generator itself costs little CPU; responses
// must carry Content-Length.
func runLoad(addr, host string, conns int, d time.Duration) (loadResult, error) {
	return runLoadDial(func() (net.Conn, error) { return net.Dial("tcp", addr) }, host, conns, d, false)
}

// runLoadDial is runLoad over connections from dial; with oneShot every
// request goes on a new connection (Connection: close), so the figure is
// connections (TLS handshakes) per second.
func runLoadDial(dial func() (net.Conn, error), host string, conns int, d time.Duration, oneShot bool) (loadResult, error) {
	req := []byte("GET / HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: gordon-bench\r\n\r\n")
	if oneShot {
		req = []byte("GET / HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: gordon-bench\r\nConnection: close\r\n\r\n")
	}
	deadline := time.Now().Add(d)
	lat := make([][]time.Duration, conns)
	errs := make([]int64, conns)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			samples := make([]time.Duration, 0, 1<<16)
			var c net.Conn
			var br *bufio.Reader
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if c == nil {
					var err error
					c, err = dial()
					if err != nil {
						errs[i]++
						time.Sleep(10 * time.Millisecond)
						continue
					}
					br = bufio.NewReaderSize(c, 16<<10)
				}
				if _, err := c.Write(req); err != nil {
					errs[i]++
					_ = c.Close()
					c = nil
					continue
				}
				if err := readResponse(br); err != nil {
					errs[i]++
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
			lat[i] = samples
		}()
	}
	wg.Wait()
	res := loadResult{Elapsed: time.Since(start)}
	all := slices.Concat(lat...)
	for _, e := range errs {
		res.Errors += e
	}
	res.Requests = int64(len(all))
	if len(all) == 0 {
		return res, errors.New("no request completed")
	}
	slices.Sort(all)
	res.P50 = all[len(all)*50/100]
	res.P99 = all[min(len(all)-1, len(all)*99/100)]
	res.samples = all
	return res, nil
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
