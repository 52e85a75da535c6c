package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// A unix socket is this machine's engine; every other endpoint is remote.
func TestRemote_EndpointClassification(t *testing.T) {
	for host, remote := range map[string]bool{
		"unix:///var/run/docker.sock":     false,
		"unix:///tmp/x/docker.sock":       false,
		"npipe:////./pipe/docker_engine":  false,
		"tcp://127.0.0.1:2375":            true,
		"tcp://vps.example:2376":          true,
		"ssh://deploy@vps.example":        true,
		"ssh://root@127.0.0.1:2222":       true,
		"http://engine.example:2375/path": true,
	} {
		assert.Equal(t, remote, isRemoteEndpoint(host), host)
	}
}

// The runner's command line is rebuilt from what cobra parsed: the verb
// path below the gordon root (also under the docker CLI's root), every set
// flag (repeatable ones once per value), consumed flags dropped, rewrites
// added, positional arguments last (after -- when one looks like a flag).
func TestRemote_RunnerArgsFromParsedFlags(t *testing.T) {
	docker := &cobra.Command{Use: "docker"}
	root := &cobra.Command{Use: "gordon"}
	root.PersistentFlags().String("state-dir", "", "")
	root.PersistentFlags().Bool("debug", false, "")
	deploy := &cobra.Command{Use: "deploy", RunE: func(*cobra.Command, []string) error { return nil }}
	deploy.Flags().StringP("file", "f", "", "")
	deploy.Flags().StringArray("service", nil, "")
	deploy.Flags().Bool("copy-images", false, "")
	deploy.Flags().String("format", "", "")
	root.AddCommand(deploy)
	docker.AddCommand(root)

	docker.SetArgs([]string{"gordon", "--debug", "deploy", "-f", "/home/me/app.toml", "--service", "web", "--service", "db", "--copy-images", "--format=json", "--state-dir", "/x"})
	var got *cobra.Command
	var gotArgs []string
	deploy.RunE = func(c *cobra.Command, a []string) error { got, gotArgs = c, a; return nil }
	require.NoError(t, docker.Execute())
	assert.Equal(t, []string{"deploy"}, verbPath(got))
	args := runnerArgs(got, gotArgs, map[string]bool{"file": true, "copy-images": true, "state-dir": true}, []string{"--file=/tmp/gordon-in/manifest/app.toml"})
	assert.Equal(t, []string{"gordon", "deploy", "--debug=true", "--format=json", "--service=web", "--service=db", "--file=/tmp/gordon-in/manifest/app.toml"}, args)

	status := &cobra.Command{Use: "status", Run: func(*cobra.Command, []string) {}}
	root.AddCommand(status)
	assert.Equal(t, []string{"gordon", "status", "--", "-odd"}, runnerArgs(status, []string{"-odd"}, nil, nil))
	assert.True(t, localOnly(root), "the root (help) runs here")
	version := &cobra.Command{Use: "version"}
	root.AddCommand(version)
	assert.True(t, localOnly(version))
	assert.False(t, localOnly(status))
}

// The bundle survives the trip; a length over the bound is refused before
// anything is read into memory.
func TestRemote_BundleRoundTripAndBound(t *testing.T) {
	var buf bytes.Buffer
	in := runnerBundle{
		Files:        []runnerFile{{Path: "manifest/app.toml", Mode: 0o600, Data: []byte("name = \"blog\"\n")}},
		Stdin:        []byte("s3cret"),
		RegistryAuth: map[string]string{"127.0.0.1:5000": "eyJ1In0"},
	}
	require.NoError(t, writeBundle(&buf, in))
	buf.WriteString("trailing: the control stream")
	out, err := readBundle(&buf)
	require.NoError(t, err)
	assert.Equal(t, in, out)
	assert.Equal(t, "trailing: the control stream", buf.String(), "the bundle reader stops at the bundle's end")

	var big [8]byte
	binary.BigEndian.PutUint64(big[:], maxBundle+1)
	_, err = readBundle(bytes.NewReader(big[:]))
	assert.ErrorIs(t, err, core.ErrInvalid)
}

// Only a static Linux executable for the engine's architecture is sent as
// a custom plugin.
func TestRemote_PluginMustBeStaticLinuxExecutable(t *testing.T) {
	assert.Equal(t, "not an ELF executable", staticLinuxExecutable([]byte("#!/bin/sh\necho hi\n"), "x86_64"))
	if data, err := os.ReadFile("/bin/ls"); err == nil {
		assert.Contains(t, staticLinuxExecutable(data, "x86_64"), "dynamically linked")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	if staticLinuxExecutable(data, "x86_64") != "" {
		t.Skip("this test binary is not static (CGO_ENABLED=0 go test checks the architecture case)")
	}
	assert.Contains(t, staticLinuxExecutable(data, "aarch64"), "built for EM_X86_64")
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
	go func() { watchControl(pr, 300*time.Millisecond); close(done) }()
	for range 8 {
		_, err := pw.Write([]byte{0})
		require.NoError(t, err)
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
	go watchControl(pr2, time.Hour)
	t0 := time.Now()
	pw2.Close()
	select {
	case <-sigs:
		assert.Less(t, time.Since(t0), time.Second)
	case <-time.After(2 * time.Second):
		t.Fatal("no SIGTERM at the end of stdin")
	}
}
