package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/plugins/sdk"
)

const cliReps = 10

// timeCmd runs argv reps times after one unmeasured warm-up and returns
// the wall times (fork to exit).
func timeCmd(ctx context.Context, reps int, env []string, argv ...string) ([]time.Duration, error) {
	var ds []time.Duration
	for i := -1; i < reps; i++ {
		r := run(ctx, env, argv...)
		if err := r.err(strings.Join(argv, " ")); err != nil {
			return nil, err
		}
		if i >= 0 {
			ds = append(ds, r.Elapsed())
		}
	}
	return ds, nil
}

// measureCLI: cold start of `docker gordon version` and its baselines.
func (b *bench) measureCLI(ctx context.Context, s *section) error {
	s.Method = fmt.Sprintf("Wall time from fork to exit, median of %d runs after one warm-up run (the binaries are in the page cache: \"cold\" means a new process, not a cold disk). `docker gordon …` goes through the docker CLI, which execs the plugin (bin/docker-gordon of this commit, via a temporary DOCKER_CONFIG). Status with N apps: `docker gordon status` over a state directory holding N deployed one-service apps (real containers, see section 5), measured when the apps exist. Plugin start+handshake: the host side of plugins/sdk (the code the CLI uses) launching each built-in plugin (re-exec of docker-gordon with GORDON_PLUGIN) up to a dispensed gRPC client, then killing it; median of 5.", cliReps)
	s.Baseline = "`docker --version` for the CLI; status with 1 app for status with 10 and 100; an exec of the plugin binary that prints its version and exits (`docker-gordon docker-cli-plugin-metadata`) for plugin start+handshake, or, when bin/ holds a gordon-backends build, the same plugin started from docker-gordon."
	state := filepath.Join(b.tmp, "state-empty")
	env := []string{"DOCKER_CONFIG=" + b.dockerConfig, "GORDON_STATE_DIR=" + state}
	base, err := timeCmd(ctx, cliReps, env, "docker", "--version")
	if err != nil {
		return err
	}
	gv, err := timeCmd(ctx, cliReps, env, "docker", "gordon", "version")
	if err != nil {
		return err
	}
	dv, err := timeCmd(ctx, cliReps, env, "docker", "version")
	if err != nil {
		return err
	}
	bm := ms(median(base))
	s.add("`docker gordon version` (asks the engine its version)", ms(median(gv)), "ms", "`docker --version`", bm, "")
	s.add("`docker version` (same engine round trip, for reference)", ms(median(dv)), "ms", "`docker --version`", bm, "")
	s.extra("docker_version_flag_ns", base)
	s.extra("gordon_version_ns", gv)
	s.extra("docker_version_ns", dv)
	return nil
}

// measurePlugins: start + handshake of each built-in plugin.
func (b *bench) measurePlugins(ctx context.Context, s *section) error {
	self := filepath.Join(b.bin, "docker-gordon")
	state := filepath.Join(b.tmp, "state-empty")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	execBase, err := timeCmd(ctx, 5, nil, self, "docker-cli-plugin-metadata")
	if err != nil {
		return err
	}
	bm := ms(median(execBase))
	backends, _ := filepath.Glob(filepath.Join(b.bin, "gordon-backends-*"))
	samples := map[string][]time.Duration{}
	fromBackends := map[string][]time.Duration{}
	for _, id := range sdk.DefaultBuiltins {
		d, err := b.pluginStarts(ctx, self, state, id)
		if err != nil {
			return err
		}
		samples[id] = d
		m := median(d)
		if len(backends) == 1 {
			if fromBackends[id], err = b.pluginStarts(ctx, backends[0], state, id); err != nil {
				return err
			}
			m = median(fromBackends[id])
			s.add("plugin "+id+" from gordon-backends (what a deploy runs): start + handshake", ms(m), "ms", "the same from docker-gordon", ms(median(d)), "")
		} else {
			s.add("plugin "+id+": start + handshake", ms(m), "ms", "exec of the plugin binary", bm, "")
		}
		if id == "probe/http" {
			b.probePluginStart = m
		}
	}
	if len(fromBackends) > 0 {
		s.extra("plugin_start_backends_ns", fromBackends)
	}
	s.extra("plugin_start_ns", samples)
	s.extra("plugin_exec_baseline_ns", execBase)
	return nil
}

// pluginStarts starts built-in plugin id from exe 6 times (the first is a
// warm-up) up to a dispensed client and returns the 5 measured times.
func (b *bench) pluginStarts(ctx context.Context, exe, state, id string) ([]time.Duration, error) {
	kind, name, err := sdk.ParseID(id)
	if err != nil {
		return nil, err
	}
	var out []time.Duration
	for i := -1; i < 5; i++ {
		h, err := sdk.NewHost(sdk.HostConfig{SelfExe: exe, Env: []string{"GORDON_STATE_DIR=" + state}})
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		switch kind {
		case sdk.KindRuntime:
			_, err = h.Runtime(ctx, name)
		case sdk.KindProbe:
			_, err = h.Probe(ctx, name)
		case sdk.KindTraffic:
			_, err = h.Traffic(ctx, name)
		}
		d := time.Since(t0)
		h.Close()
		if err != nil {
			return nil, fmt.Errorf("plugin %s from %s: %w", id, exe, err)
		}
		if i >= 0 {
			out = append(out, d)
		}
	}
	return out, nil
}
