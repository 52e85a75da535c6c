package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	dataReps = 3
	dataMiB  = 100
)

// opSteps is the part of a verb's --format json output (the op, or a
// result holding it under "op") the data measurement reads.
type opSteps struct {
	Steps []benchStep `json:"steps"`
	Op    struct {
		Steps []benchStep `json:"steps"`
	} `json:"op"`
}

type benchStep struct {
	ID string `json:"id"`
	// deploy prints phases_ms, a lifecycle verb's result phases ("1.5s").
	PhasesMS map[string]int64  `json:"phases_ms"`
	Phases   map[string]string `json:"phases"`
}

// stepPhase is phase of step id in a verb's JSON output.
func stepPhase(stdout, id, phase string) (time.Duration, error) {
	var o opSteps
	if err := json.Unmarshal([]byte(stdout), &o); err != nil {
		return 0, fmt.Errorf("read the op: %v", err)
	}
	for _, s := range append(o.Steps, o.Op.Steps...) {
		if s.ID == id {
			if n, ok := s.PhasesMS[phase]; ok {
				return time.Duration(n) * time.Millisecond, nil
			}
			if d, err := time.ParseDuration(s.Phases[phase]); err == nil {
				return d, nil
			}
			return 0, fmt.Errorf("step %s has no phase %s: %s", id, phase, tail(stdout, 2000))
		}
	}
	return 0, fmt.Errorf("the op has no step %s", id)
}

// measureData: how much longer the hold of a sequential replacement gets
// when it snapshots a 100 MiB volume (docs/data.md), and a restore,
// against `docker cp` of the same data in the same run.
func (b *bench) measureData(ctx context.Context, s *section) error {
	s.Method = fmt.Sprintf("Data: a one-service app (gordon-test/httpd) with a named volume holding %d MiB of random bytes (incompressible: zstd's worst case) and [snapshots] before_deploy = \"always\"; %d deploys that change its env replace it sequentially, and each snapshot step (taken while the edge holds the service: the time it adds to the hold) is read from the journal (phase data of service.web.snapshot); then `docker gordon snapshots restore` of the last snapshot, %d times, its restore step likewise (the first may build the volume helper image, once per binary: the median leaves that out). Baseline: `docker cp` of the same volume out of the serving container into a directory (and back into it, for the restore), %d times each, in the same run; medians.", dataMiB, dataReps, dataReps, dataReps)
	s.Baseline = "`docker cp` of the same data (out; in for the restore)"
	state := filepath.Join(b.tmp, "state-data")
	edge, _, err := b.startEdge(ctx, state, "edge-data")
	if err != nil {
		return err
	}
	defer edge.Stop()
	app := appPrefix + "data"
	file := filepath.Join(b.tmp, app+".toml")
	deploy := func(i int) (runResult, error) {
		m := manifest(app, b.v1, app+".test") + fmt.Sprintf("[[services.web.volume]]\nname = \"data\"\npath = \"/data\"\n[services.web.snapshots]\nbefore_deploy = \"always\"\nkeep = 2\n[services.web.env]\nREP = \"%d\"\n", i)
		if err := os.WriteFile(file, []byte(m), 0o644); err != nil {
			return runResult{}, err
		}
		r := b.gordon(ctx, state, false, "deploy", "-f", file, "--format", "json")
		return r, r.err("deploy " + app)
	}
	if _, err := deploy(0); err != nil {
		return err
	}
	defer b.removeApps(context.WithoutCancel(ctx), app)
	blob := filepath.Join(b.tmp, "data-blob.bin")
	if err := writeRandom(blob, dataMiB<<20); err != nil {
		return err
	}
	defer os.Remove(blob)
	serving := func() string {
		return strings.TrimSpace(run(ctx, nil, "docker", "ps", "-q", "--filter", "label=dev.gordon.app="+app, "--filter", "status=running").Stdout)
	}
	if r := run(ctx, nil, "docker", "cp", blob, serving()+":/data/blob.bin"); r.err("docker cp into the volume") != nil {
		return r.err("docker cp into the volume")
	}
	var snaps, restores, cpOut, cpIn []time.Duration
	for i := 1; i <= dataReps; i++ {
		r, err := deploy(i)
		if err != nil {
			return err
		}
		d, err := stepPhase(r.Stdout, "service.web.snapshot", "data")
		if err != nil {
			return err
		}
		snaps = append(snaps, d)
	}
	ls := b.gordon(ctx, state, false, "snapshots", "ls", app, "--format", "json")
	var list []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(ls.Stdout), &list); err != nil || len(list) == 0 {
		return fmt.Errorf("snapshots ls %s: %v %s", app, err, ls.Stderr)
	}
	// Each restore also snapshots what the volume holds first; the first
	// one may build the volume helper image (once per binary), which the
	// median leaves out.
	for range dataReps {
		r := b.gordon(ctx, state, false, "snapshots", "restore", app, list[len(list)-1].ID, "--format", "json")
		if err := r.err("snapshots restore"); err != nil {
			return err
		}
		d, err := stepPhase(r.Stdout, "service.web.restore", "data")
		if err != nil {
			return err
		}
		restores = append(restores, d)
	}
	id := serving()
	for i := range dataReps {
		dir := filepath.Join(b.tmp, fmt.Sprintf("data-cp-%d", i))
		r := run(ctx, nil, "docker", "cp", id+":/data", dir)
		if err := r.err("docker cp out"); err != nil {
			return err
		}
		cpOut = append(cpOut, r.Elapsed())
		r = run(ctx, nil, "docker", "cp", dir+"/.", id+":/data")
		if err := r.err("docker cp in"); err != nil {
			return err
		}
		cpIn = append(cpIn, r.Elapsed())
		os.RemoveAll(dir)
	}
	ms1, mo := median(snaps), median(cpOut)
	s.add(fmt.Sprintf("snapshot of a %d MiB volume during a sequential replacement (added to the hold)", dataMiB), ms(ms1), "ms", "`docker cp` out", ms(mo), "goal: at most 1.5× the copy")
	mr, mi := median(restores), median(cpIn)
	s.add(fmt.Sprintf("restore of a %d MiB snapshot (snapshots restore, while held)", dataMiB), ms(mr), "ms", "`docker cp` in", ms(mi), "")
	s.extra("snapshot_ns", snaps)
	s.extra("restore_ns", restores)
	s.extra("docker_cp_out_ns", cpOut)
	s.extra("docker_cp_in_ns", cpIn)
	return nil
}

// writeRandom writes n random bytes to path.
func writeRandom(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, rand.Reader, n); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
