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

// CPUTime is the CPU time (user + system, all threads) pids have used so
// far, from /proc/PID/stat in clock ticks of 10 ms (USER_HZ 100, which
// Linux reports on every architecture); a process that is gone counts 0.
func CPUTime(pids ...int) time.Duration {
	var ticks int64
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name, which may hold spaces: state is
		// the 3rd field of the line, utime the 14th, stime the 15th.
		i := strings.LastIndexByte(string(data), ')')
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * 10 * time.Millisecond
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
