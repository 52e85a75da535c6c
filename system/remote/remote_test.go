package remote

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// A unix socket is this machine's engine; every other endpoint is remote.
func TestRemote_EndpointClassification(t *testing.T) {
	for host, isRemote := range map[string]bool{
		"unix:///var/run/docker.sock":     false,
		"unix:///tmp/x/docker.sock":       false,
		"npipe:////./pipe/docker_engine":  false,
		"tcp://127.0.0.1:2375":            true,
		"tcp://vps.example:2376":          true,
		"ssh://deploy@vps.example":        true,
		"ssh://root@127.0.0.1:2222":       true,
		"http://engine.example:2375/path": true,
	} {
		assert.Equal(t, isRemote, IsRemoteEndpoint(host), host)
	}
}

// The bundle survives the trip; a length over the bound is refused before
// anything is read into memory.
func TestRemote_BundleRoundTripAndBound(t *testing.T) {
	var buf bytes.Buffer
	in := Bundle{
		Files:        []File{{Path: "manifest/app.toml", Mode: 0o600, Data: []byte("name = \"blog\"\n")}},
		Stdin:        []byte("s3cret"),
		RegistryAuth: map[string]string{"127.0.0.1:5000": "eyJ1In0"},
	}
	require.NoError(t, WriteBundle(&buf, in))
	buf.WriteString("trailing: the control stream")
	out, err := ReadBundle(&buf)
	require.NoError(t, err)
	assert.Equal(t, in, out)
	assert.Equal(t, "trailing: the control stream", buf.String(), "the bundle reader stops at the bundle's end")

	var big [8]byte
	binary.BigEndian.PutUint64(big[:], maxBundle+1)
	_, err = ReadBundle(bytes.NewReader(big[:]))
	assert.ErrorIs(t, err, core.ErrInvalid)
}

// The runner stops (SIGTERM to itself) when the CLI's stdin ends or falls
// silent, and not while heartbeats arrive.
func TestRemote_RunnerStopsWhenTheCLIGoesAwayOrSilent(t *testing.T) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM)
	defer signal.Stop(sigs)

	// Silence: heartbeats for a while, then none.
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() { WatchControl(pr, 300*time.Millisecond); close(done) }()
	for range 8 {
		_, err := pw.Write([]byte{0})
		require.NoError(t, err)
		// Heartbeats spread over more than the 300 ms silence bound: the
		// passage of time with heartbeats in it is the behaviour under test.
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-sigs:
		t.Fatal("SIGTERM while heartbeats arrive")
	default:
	}
	select {
	case <-sigs:
	case <-time.After(2 * time.Second):
		t.Fatal("no SIGTERM after the heartbeats stopped")
	}
	<-done
	pw.Close()

	// End of stdin: at once.
	pr2, pw2 := io.Pipe()
	go WatchControl(pr2, time.Hour)
	t0 := time.Now()
	pw2.Close()
	select {
	case <-sigs:
		assert.Less(t, time.Since(t0), time.Second)
	case <-time.After(2 * time.Second):
		t.Fatal("no SIGTERM at the end of stdin")
	}
}
