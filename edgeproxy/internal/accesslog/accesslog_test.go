package accesslog

import (
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// R74 (access log): a line is one valid JSON object whatever bytes the
// request carried (quotes, backslashes, control characters, invalid
// UTF-8), and the values read back are the ones given (invalid UTF-8 as
// U+FFFD).
func TestAccessLineIsValidJSONForHostileValues(t *testing.T) {
	e := Entry{
		Host: []byte("h\x01st\x7f"), Method: []byte("GET"), Path: []byte("/p\"?\\x=\xff\xfeé"),
		Status: 502, Start: time.Now().Add(-1500 * time.Microsecond), BytesOut: 42, App: "a\"pp", Service: "s\\v", Instance: "c\n1",
		Client: "2001:db8::1", RequestIDS: "id\t1", Protocol: "HTTP/1.1",
	}
	line := appendLine(nil, &e, time.Now(), &timeCache{})
	require.True(t, strings.HasSuffix(string(line), "}\n"))
	assert.Equal(t, 1, strings.Count(string(line), "\n"), "one line")
	var got map[string]any
	require.NoError(t, json.Unmarshal(line, &got), "%s", line)
	assert.Equal(t, "h\x01st\x7f", got["host"])
	assert.Equal(t, "/p\"?\\x=\ufffd\ufffdé", got["path"])
	assert.Equal(t, "a\"pp", got["app"])
	assert.Equal(t, "s\\v", got["service"])
	assert.Equal(t, "c\n1", got["instance"])
	assert.Equal(t, "id\t1", got["request_id"])
	assert.Equal(t, 502.0, got["status"])
	assert.Equal(t, 42.0, got["bytes_out"])
	assert.InDelta(t, 1.5, got["duration_ms"], 1.0)
}

// R74 (cost): encoding and queuing a line allocates nothing
// once the pooled buffer is warm.
func TestAccessLogWriteDoesNotAllocate(t *testing.T) {
	a := New(io.Discard, nil)
	defer a.Close()
	e := Entry{Host: []byte("example.test"), Method: []byte("GET"), Path: []byte("/index.html?x=1"),
		Status: 200, Start: time.Now(), BytesOut: 1234, App: "app", Service: "web", Instance: "app-web-1", Client: "192.0.2.1",
		RequestID: []byte("0123456789abcdef0123456789abcdef"), Protocol: "HTTP/1.1"}
	a.Write(&e)
	allocs := testing.AllocsPerRun(1000, func() { a.Write(&e) })
	assert.Zero(t, allocs)
}

// R74 (access log): an access log file is rotated by size: PATH becomes
// PATH.1, PATH.1 becomes PATH.2, and no more than keep rotated files
// stay; no line is split across files.
func TestAccessLogFileRotatedBySizeKeepingN(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	w, err := Open(path, 100, 2)
	require.NoError(t, err)
	line := strings.Repeat("x", 39) + "\n" // 40 bytes: two per file
	for range 9 {
		_, err := io.WriteString(w, line)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	for _, f := range []string{path, path + ".1", path + ".2"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err, f)
		assert.LessOrEqual(t, len(b), 100, f)
		assert.Zero(t, len(b)%len(line), "%s holds whole lines", f)
	}
	_, err = os.Stat(path + ".3")
	assert.ErrorIs(t, err, os.ErrNotExist, "only 2 rotated files are kept")
	cur, _ := os.ReadFile(path)
	assert.Len(t, cur, 40, "9 lines: 2+2+2+2 rotated away, 1 in the current file")

	// Reopened, it appends (and counts what is there toward the size).
	w, err = Open(path, 100, 2)
	require.NoError(t, err)
	_, err = io.WriteString(w, line)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	cur, _ = os.ReadFile(path)
	assert.Len(t, cur, 80)
}

// Open: "off" is no log, "stdout" is standard output, and a
// file in a missing directory is an error naming it.
func TestOpenAccessLogDestinations(t *testing.T) {
	w, err := Open(Off, 0, 0)
	require.NoError(t, err)
	assert.Nil(t, w)
	w, err = Open(Stdout, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, os.Stdout, w.(nopWriteCloser).Writer)
	_, err = Open(filepath.Join(t.TempDir(), "missing", "a.log"), 0, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing/a.log")
}

func TestClientAfterTrustedProxies(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	for _, tc := range []struct {
		peer        string
		peerTrusted bool
		xff, want   string
	}{
		{"10.0.0.1", true, "192.0.2.7", "192.0.2.7"},
		{"10.0.0.1", true, "198.51.100.1, 192.0.2.7, 10.9.9.9", "192.0.2.7"},
		{"10.0.0.1", true, "10.1.1.1,10.2.2.2", "10.1.1.1"},
		{"10.0.0.1", true, "", "10.0.0.1"},
		{"10.0.0.1", true, "garbage, 10.2.2.2", "garbage"},
		{"10.0.0.1", true, "[2001:db8::5], 2001:db8::9", "[2001:db8::5]"},
		{"192.0.2.1", false, "203.0.113.1", "192.0.2.1"},
	} {
		assert.Equal(t, tc.want, clientAfterTrusted(tc.peer, tc.peerTrusted, tc.xff, trusted), "%+v", tc)
	}
}

// BenchmarkAccessLogLine is the access log's cost per request: encoding
// one line and queuing it for a file (the flush every 500 ms included);
// compare with BenchmarkH1Proxy's ns/op per request.
func BenchmarkAccessLogLine(b *testing.B) {
	w, err := Open(filepath.Join(b.TempDir(), "access.log"), 0, 0)
	require.NoError(b, err)
	defer w.Close()
	a := New(w, nil)
	defer a.Close()
	e := Entry{Host: []byte("example.test"), Method: []byte("GET"), Path: []byte("/index.html?x=1"),
		Status: 200, Start: time.Now(), BytesOut: 1234, App: "app", Service: "web", Instance: "app-web-1", Client: "192.0.2.1",
		RequestID: []byte("0123456789abcdef0123456789abcdef"), Protocol: "HTTP/1.1"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.Write(&e)
		}
	})
}

// The time field is RFC 3339 UTC with milliseconds, right across second
// boundaries (the cached second is reformatted) and for any zone.
func TestAccessLogTimeFieldAcrossSeconds(t *testing.T) {
	var tc timeCache
	zone := time.FixedZone("X", 5*3600)
	for _, ts := range []time.Time{
		time.Date(2026, 12, 2, 8, 0, 59, 999_900_000, time.UTC),
		time.Date(2026, 12, 2, 8, 1, 0, 7_000_000, time.UTC),
		time.Date(2026, 12, 2, 13, 1, 0, 120_000_000, zone),
		time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC),
	} {
		got := string(tc.append(nil, ts))
		assert.Equal(t, ts.UTC().Format("2006-01-02T15:04:05.000Z"), got)
	}
}

// chunkRecorder records each Write it gets.
type chunkRecorder struct{ chunks [][]byte }

func (c *chunkRecorder) Write(p []byte) (int, error) {
	c.chunks = append(c.chunks, append([]byte(nil), p...))
	return len(p), nil
}

// Every write the access log makes to its output holds whole lines, also
// when its buffer fills (an O_APPEND file shared by the two edges of a
// hand-over, or rotated, never gets half a line).
func TestAccessLogWritesWholeLines(t *testing.T) {
	rec := &chunkRecorder{}
	a := New(rec, nil)
	path := []byte("/" + strings.Repeat("p", 700))
	e := Entry{Host: []byte("h.test"), Method: []byte("GET"), Path: path, Status: 200, Start: time.Now(), App: "app", Service: "web", Instance: "i", Protocol: "HTTP/1.1"}
	for range 300 { // ~240 KiB: several buffer fills
		a.Write(&e)
	}
	require.NoError(t, a.Close())
	require.Greater(t, len(rec.chunks), 2)
	lines := 0
	for _, c := range rec.chunks {
		assert.Equal(t, byte('\n'), c[len(c)-1], "a write ends with a whole line")
		assert.True(t, strings.HasPrefix(string(c), `{"time":`), "a write starts with a line")
		lines += strings.Count(string(c), "\n")
	}
	assert.Equal(t, 300, lines)
}
