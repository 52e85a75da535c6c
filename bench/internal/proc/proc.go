// Package proc holds the process helpers the benchmarks share (bench/edge
// and bench/suite): reading a child's first output line, and resident
// memory from /proc (Linux).
package proc

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ReadLine reads one line from r without buffering past it (a child's
// address announcement; the rest of its output stays in r), trimmed.
func ReadLine(r io.Reader) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for {
		n, err := r.Read(one)
		if n == 1 {
			if one[0] == '\n' {
				return strings.TrimSpace(string(b)), nil
			}
			b = append(b, one[0])
		}
		if err != nil {
			return "", err
		}
	}
}

// RSSKiB is the summed VmRSS of pids in KiB (a process that is gone counts
// 0).
func RSSKiB(pids ...int) int64 {
	var total int64
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				total += n
				break
			}
		}
	}
	return total
}

// Children lists the direct children of pid (e.g. nginx's workers).
func Children(pid int) []int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for f := range strings.FieldsSeq(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// PeakRSS samples RSSKiB(pids()...) every interval until the returned stop
// is called, which returns the largest sample in KiB.
func PeakRSS(pids func() []int, every time.Duration) (stop func() int64) {
	var peak int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				peak = max(peak, RSSKiB(pids()...))
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		return peak
	}
}
