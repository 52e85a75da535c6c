// Package probehelper is the internal readiness helper (SPEC R30): the
// process a probe-helper container runs, from the binary that built its
// image (docker-gordon, or gordon-backends when it serves runtime/docker),
// to probe a port only the app's network reaches.
package probehelper

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	httpprobe "github.com/gordon-deploy/docker-gordon/plugins/probe/http"
	tcpprobe "github.com/gordon-deploy/docker-gordon/plugins/probe/tcp"
	"github.com/gordon-deploy/docker-gordon/plugins/runtime/docker"
)

// helperProbes are the HTTP and TCP probes, in process.
type helperProbes struct{}

func (helperProbes) Prober(_ context.Context, kind, _ string) (core.Prober, error) {
	switch kind {
	case core.ReadinessHTTP:
		return httpprobe.New(), nil
	case core.ReadinessTCP:
		return tcpprobe.New(), nil
	}
	return nil, fmt.Errorf("internal probe of type %q: %w", kind, core.ErrNotFound)
}

// RunIfRequested is the internal readiness helper's main (R30):
// when docker.EnvProbeHelper is set it runs the HTTP or TCP readiness wait
// it describes (the same R31–R33 checks as the loopback probes, 500 ms
// between attempts), prints a docker.HelperResult as the last stdout line and exits
// (0 ready, 1 not ready, 2 bad request). When docker.EnvVolumeWipe is set
// it empties that directory and exits (wipe). It returns false otherwise.
func RunIfRequested() bool {
	if dir, ok := os.LookupEnv(docker.EnvVolumeWipe); ok {
		os.Exit(wipe(dir))
	}
	raw, ok := os.LookupEnv(docker.EnvProbeHelper)
	if !ok {
		return false
	}
	var req docker.HelperRequest
	out := json.NewEncoder(os.Stdout)
	if err := json.Unmarshal([]byte(raw), &req); err != nil {
		_ = out.Encode(docker.HelperResult{Detail: "bad helper request: " + err.Error()})
		os.Exit(2)
	}
	budget := time.Duration(req.TimeoutMS) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget+5*time.Second)
	defer cancel()
	// R30: 500 ms between attempts (each HTTP attempt capped at 2 s, R31).
	w := &engine.ReadinessWaiter{Probes: helperProbes{}, HTTPInterval: 500 * time.Millisecond, TCPInterval: 500 * time.Millisecond}
	target := core.ProbeTarget{Address: req.Address, Host: req.Host, StartedAt: time.Now()}
	if target.Host == "" {
		target.Host = req.Address
	}
	r := core.Readiness{Type: req.Type, Path: req.Path, Timeout: core.Duration(budget)}
	res, err := w.Wait(ctx, target, r, nil)
	result := docker.HelperResult{Ready: err == nil, Attempts: res.Attempts, Detail: res.LastDetail}
	if err != nil {
		result.Detail = err.Error()
	}
	_ = out.Encode(result)
	if !result.Ready {
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// wipe is the volume helper's main (a snapshot restore, see
// docker.Runtime.RestoreVolume): it removes every entry of dir, not dir
// itself, and returns the exit status (0 done, 1 an entry could not be
// removed, named on stderr).
func wipe(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "empty the volume:", err)
		return 1
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			fmt.Fprintln(os.Stderr, "empty the volume:", err)
			return 1
		}
	}
	return 0
}
