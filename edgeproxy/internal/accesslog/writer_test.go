package accesslog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// disk is a file system whose free space the test sets: a write takes
// what fits and fails with ENOSPC for the rest; opens can be made to fail.
type disk struct {
	mu       sync.Mutex
	free     int64
	failOpen int // opens still to fail
}

func (d *disk) setFree(n int64) { d.mu.Lock(); d.free = n; d.mu.Unlock() }

func (d *disk) open(path string) (file, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failOpen > 0 {
		d.failOpen--
		return nil, &os.PathError{Op: "open", Path: path, Err: syscall.ENOSPC}
	}
	f, err := openOSFile(path)
	if err != nil {
		return nil, err
	}
	return &diskFile{file: f, d: d}, nil
}

type diskFile struct {
	file
	d *disk
}

func (f *diskFile) Write(p []byte) (int, error) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	n := min(int64(len(p)), f.d.free)
	w, err := f.file.Write(p[:n])
	f.d.free -= int64(w)
	if err == nil && w < len(p) {
		err = &os.PathError{Op: "write", Path: "access.log", Err: syscall.ENOSPC}
	}
	return w, err
}

func (f *diskFile) Truncate(size int64) error {
	st, err := f.Stat()
	if err == nil {
		f.d.mu.Lock()
		f.d.free += st.Size() - size
		f.d.mu.Unlock()
	}
	return f.file.Truncate(size)
}

// fileLog is a Log over a rotating file on d (rotated at maxSize).
func fileLog(t *testing.T, d *disk, maxSize int64) (*Log, string, *[]error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "access.log")
	r := &rotatingFile{path: path, maxSize: maxSize, keep: 2, openFile: d.open}
	require.NoError(t, r.open())
	a := New(r, nil)
	reports := &[]error{}
	a.SetReporter(func(err error) { *reports = append(*reports, err) })
	t.Cleanup(func() { _ = a.Close(); _ = r.Close() })
	return a, path, reports
}

// reportsOf reads the reports under the log's lock (the reporter runs
// under it).
func reportsOf(a *Log, reports *[]error) []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]error(nil), *reports...)
}

func logN(a *Log, n int, tag string) {
	for i := range n {
		a.Write(&Entry{HostS: "h.test", MethodS: "GET", PathS: "/" + tag + "/" + strings.Repeat("x", i%50), Status: 200, Start: time.Now(), Protocol: "HTTP/1.1"})
	}
}

// readLines returns the file's lines, failing on any that is not a whole
// JSON object, and how many have tag in their path.
func readLines(t *testing.T, path, tag string) (lines, tagged int) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	if len(b) > 0 {
		require.Equal(t, byte('\n'), b[len(b)-1], "the file ends with a whole line")
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), "a torn line: %q", l)
		lines++
		if strings.HasPrefix(m["path"].(string), "/"+tag+"/") {
			tagged++
		}
	}
	return lines, tagged
}

// The access log on a full disk (the review's run, with an injected
// disk): a failed write is reported once and counted, the file never holds
// half a line, and when space returns logging resumes by itself (the
// periodic flush retries) with every line whole, the lines buffered during
// the outage included up to the buffer.
func TestAccessLogSurvivesAFullDiskWithoutATornLine(t *testing.T) {
	d := &disk{free: 1 << 30}
	a, path, reports := fileLog(t, d, 1<<30)
	logN(a, 10, "before")
	a.Flush()
	d.setFree(1000) // the disk fills: 1000 bytes left
	logN(a, 400, "full")
	a.Flush()
	a.Flush()
	assert.Positive(t, a.WriteErrors(), "failed writes are counted")
	require.Len(t, reportsOf(a, reports), 1, "reported once, not per write")
	assert.ErrorIs(t, reportsOf(a, reports)[0], syscall.ENOSPC)
	_, before := readLines(t, path, "before")
	assert.Equal(t, 10, before)

	d.setFree(1 << 30) // space returns: the periodic flush retries
	require.Eventually(t, func() bool { return len(reportsOf(a, reports)) == 2 }, 5*time.Second, 10*time.Millisecond,
		"logging resumes by itself once space returns")
	assert.NoError(t, reportsOf(a, reports)[1], "the recovery is reported")
	logN(a, 350, "after")
	a.Flush()
	_, after := readLines(t, path, "after")
	assert.Equal(t, 350, after)
	lines, full := readLines(t, path, "full")
	assert.Positive(t, full, "lines buffered during the outage are written")
	assert.Equal(t, 10+full+350, lines)
	assert.Equal(t, int64(400-full), a.Dropped(), "what did not fit the buffer is counted as dropped")
}

// A rotation whose new file cannot be opened leaves a file open (the old
// one, renamed back): the next lines are written, and a later rotation
// succeeds.
func TestAccessLogFailedRotationLeavesAFileOpen(t *testing.T) {
	d := &disk{free: 1 << 30}
	path := filepath.Join(t.TempDir(), "access.log")
	r := &rotatingFile{path: path, maxSize: 100, keep: 2, openFile: d.open}
	require.NoError(t, r.open())
	t.Cleanup(func() { _ = r.Close() })
	line := strings.Repeat("x", 59) + "\n"
	_, err := r.Write([]byte(line))
	require.NoError(t, err)
	d.mu.Lock()
	d.failOpen = 1
	d.mu.Unlock()
	_, err = r.Write([]byte(line)) // rotates: the new file fails to open
	require.NoError(t, err, "the old file took the line")
	b, _ := os.ReadFile(path)
	assert.Equal(t, 2*len(line), len(b))
	_, err = r.Write([]byte(line)) // the next rotation succeeds
	require.NoError(t, err)
	b, _ = os.ReadFile(path)
	assert.Equal(t, line, string(b))
	_, err = os.Stat(path + ".1")
	assert.NoError(t, err)

	// With no rotated files kept, a failed open is retried at the next write.
	r2 := &rotatingFile{path: filepath.Join(t.TempDir(), "a.log"), maxSize: 100, keep: 0, openFile: d.open}
	require.NoError(t, r2.open())
	t.Cleanup(func() { _ = r2.Close() })
	_, err = r2.Write([]byte(line))
	require.NoError(t, err)
	d.mu.Lock()
	d.failOpen = 1
	d.mu.Unlock()
	_, err = r2.Write([]byte(line))
	require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
	_, err = r2.Write([]byte(line))
	assert.NoError(t, err, "the open is retried")
}
