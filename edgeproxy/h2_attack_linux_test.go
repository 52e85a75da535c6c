package edgeproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// cpuTime is the CPU time the test process used so far.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// R62 (HTTP/2 flow control, CPU): a stream waiting for window queued a
// flush each time it woke, and every flush, empty or not, woke every
// waiting writer: one stream on a window of 0 kept the writer and the
// flusher spinning (a core per such connection, until the stall bound).
// Streams waiting for window now cost nothing while they wait.
func TestR62_H2StalledStreamsDoNotSpin(t *testing.T) {
	if raceEnabled {
		t.Skip("a CPU bound")
	}
	big := strings.Repeat("w", 100_000)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, big)
	}))
	t.Cleanup(b.Close)
	e, _ := tlsH1Edge(t, "spin2.test", b)
	// The behaviour under test is CPU used over a span of time: the
	// process's CPU time over 500 ms of wall time.
	cpuOver500ms := func() time.Duration {
		before := cpuTime(t)
		time.Sleep(500 * time.Millisecond)
		return cpuTime(t) - before
	}
	base := cpuOver500ms() // what the process uses meanwhile anyway
	for _, streams := range []int{1, 128} {
		r := dialRawH2(t, e, "spin2.test", http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		for i := range streams {
			r.request(uint32(2*i+1), true, "GET", "/", "spin2.test")
		}
		// The streams reach their wait: the edge reports no event for a
		// stream blocked on window, so this is a settle before measuring.
		time.Sleep(300 * time.Millisecond)
		used := cpuOver500ms()
		assert.Less(t, used, base+250*time.Millisecond, "%d streams waiting for window, 500 ms (idle: %v); a spinning writer takes about a core, 500 ms", streams, base)

		r.c.Close()
	}
}
