package swarmlab

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kvOn is kvManifest with the service pinned to node (a hostname).
func kvOn(image, version, node string) string {
	return strings.Replace(kvManifest(image, version), "stop_grace = \"5s\"\n", fmt.Sprintf("stop_grace = \"5s\"\nnode = %q\n", node), 1)
}

// labOp is the part of `deploy --format json` the snapshot case reads.
type labOp struct {
	ID    string `json:"id"`
	Steps []struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Detail string `json:"detail"`
		Digest string `json:"digest"`
	} `json:"steps"`
}

// swarmSnapshots: the kv service pinned to a worker (not the manager)
// stores data (16 MiB); v4 is deployed, its volume snapshotted on the worker by the
// volume helper (the step journaled with its size and digest, `snapshots
// ls` listing it); the data is changed; `rollback --with-data` brings v3
// back with the data v3 had; `snapshots export` of that snapshot is a tar
// whose volume holds that data.
func (g *gordonLab) swarmSnapshots(ctx context.Context, t *testing.T) {
	worker := g.Nodes[2].Name
	kvURL := "http://" + g.Nodes[0].IP + "/k/greeting"
	put := func(v string) {
		t.Helper()
		out, err := g.InLab(ctx, "curl", "-sf", "--max-time", "3", "-X", "PUT", "--data", v, "-H", "Host: kv.lab", kvURL)
		require.NoError(t, err, out)
	}
	get := func(path string) string {
		t.Helper()
		out, err := g.InLab(ctx, "curl", "-sf", "--max-time", "3", "-H", "Host: kv.lab", "http://"+g.Nodes[1].IP+path)
		require.NoError(t, err, out)
		return strings.TrimSpace(out)
	}
	deploy := func(version string) (labOp, time.Duration) {
		t.Helper()
		t0 := time.Now()
		r := g.must(ctx, t, "deploy", "-f", writeManifest(t, kvOn(g.kv, version, worker)), "--format", "json")
		var op labOp
		require.NoError(t, json.Unmarshal([]byte(r.out), &op), r.String())
		return op, time.Since(t0)
	}

	_, took := deploy("v3")
	t.Logf("kv v3 pinned to %s in %v", worker, took.Round(time.Millisecond))
	nodes, err := g.tasksOf(ctx, "kv", "kv")
	require.NoError(t, err)
	require.Equal(t, []string{worker}, nodes)
	put("from v3")
	// 16 values of 1 MiB (random, so the stored snapshot is as large):
	// what a snapshot of that size costs on the lab is logged below.
	big := fmt.Sprintf(`for i in $(seq 16); do head -c 786432 /dev/urandom | base64 -w0 | curl -sf --max-time 10 -X PUT --data-binary @- -H 'Host: kv.lab' %s/k/big$i || exit 1; done`,
		"http://"+g.Nodes[0].IP)
	out, err := g.InLab(ctx, "bash", "-c", big)
	require.NoError(t, err, out)

	op, took := deploy("v4")
	var snap string
	for _, s := range op.Steps {
		if s.ID == "service.kv.snapshot" {
			t.Logf("deploy v4 in %v, its snapshot step: %s %s (%s)", took.Round(time.Millisecond), s.State, s.Detail, s.Digest)
			require.Equal(t, "succeeded", s.State, "the snapshot step: %+v", s)
			assert.Regexp(t, `\d+ bytes`, s.Detail)
			assert.Contains(t, s.Digest, "sha256:")
			snap = s.Detail
		}
	}
	require.NotEmpty(t, snap, "the deploy took a snapshot: %+v", op.Steps)
	r := g.must(ctx, t, "snapshots", "ls", "kv", "--format", "json")
	var snaps []struct {
		ID, Op, Trigger string
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &snaps), r.out)
	id := ""
	for _, s := range snaps {
		if s.Op == op.ID && s.Trigger == "deploy" {
			id = s.ID
		}
	}
	require.NotEmpty(t, id, "snapshots ls lists the snapshot of op %s: %s", op.ID, r.out)

	put("from v4")
	require.Equal(t, "from v4", get("/k/greeting"))
	t0 := time.Now()
	r = g.must(ctx, t, "rollback", "kv", "--with-data")
	t.Logf("rollback --with-data in %v:\n%s", time.Since(t0).Round(time.Millisecond), r.err)
	assert.Equal(t, "v3", get("/version"))
	assert.Equal(t, "from v3", get("/k/greeting"), "the data v3 had is back")

	r = g.must(ctx, t, "snapshots", "export", "kv", id)
	assert.Contains(t, volumeFile(t, []byte(r.out), "kv.json"), `"from v3"`, "the exported snapshot holds v3's data")
}

// volumeFile is the content of file name in the (one) volume of an
// exported snapshot.
func volumeFile(t *testing.T, export []byte, name string) string {
	t.Helper()
	outer := tar.NewReader(bytes.NewReader(export))
	for {
		h, err := outer.Next()
		require.NoError(t, err, "the export holds a volume")
		if !strings.HasSuffix(h.Name, ".tar.zst") {
			continue
		}
		zr, err := zstd.NewReader(outer)
		require.NoError(t, err)
		defer zr.Close()
		inner := tar.NewReader(zr)
		for {
			ih, err := inner.Next()
			if errors.Is(err, io.EOF) {
				t.Fatalf("the volume %s holds no %s", h.Name, name)
			}
			require.NoError(t, err)
			if ih.Name == name {
				b, err := io.ReadAll(inner)
				require.NoError(t, err)
				return string(b)
			}
		}
	}
}
