package main

import (
	"context"
	"fmt"
	procfs "github.com/gordon-deploy/docker-gordon/bench/internal/proc"
	"path/filepath"
	"time"
)

// measureMemory: measurement 6 (edge and watch numbers were taken during
// the other measurements; the baseline is taken here).
func (b *bench) measureMemory(ctx context.Context, s *section) error {
	s.Method = "VmRSS from /proc. gordon-edge idle: the deploy-under-load edge (one app routed) 1 s after its first deploy, before the load; under load: its peak, sampled every 200 ms, during the deploys under load (section 1); edgebench's own idle/peak figures for gordon-edge against one backend are given too. `docker gordon reconcile --watch`: its process tree after the first pass (no engine request for 2 s): the docker-gordon process, and separately its backend plugin processes and the docker CLI process that runs it."
	s.Baseline = "an idle minimal Go HTTP server (`edgebench backend`, the direct backend of section 4), measured in this run."
	p, out, err := startProc("mem-baseline", nil, "", true, filepath.Join(b.bin, "edgebench"), "backend")
	if err != nil {
		return err
	}
	defer p.Stop()
	addr, err := procfs.ReadLine(out)
	if err != nil {
		return err
	}
	if _, err := waitHTTP200(ctx, "http://"+addr+"/", "", 5*time.Second); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	base := mib(procfs.RSSKiB(p.PID()))
	bn := "idle Go HTTP server"
	if b.edgeIdleKiB > 0 {
		s.add("gordon-edge idle (1 app routed)", mib(b.edgeIdleKiB), "MiB", bn, base, "")
		s.add(fmt.Sprintf("gordon-edge under load (%d clients, peak during deploys)", b.clients), mib(b.edgeLoadKiB), "MiB", bn, base, "")
	}
	if b.ebEdgeIdle > 0 {
		s.add("gordon-edge in edgebench, idle after warm-up", mib(b.ebEdgeIdle), "MiB", bn, base, "")
		s.add("gordon-edge in edgebench, peak under load", mib(b.ebEdgeLoad), "MiB", bn, base, "")
	}
	for _, w := range b.watch {
		s.add(fmt.Sprintf("`reconcile --watch` idle, %d app(s): docker-gordon process", w.Apps), mib(w.Gordon), "MiB", bn, base, "")
		s.add(fmt.Sprintf("`reconcile --watch` idle, %d app(s): its %d backend plugin processes", w.Apps, w.PluginCount), mib(w.Plugins), "MiB", bn, base, "")
		s.add(fmt.Sprintf("`reconcile --watch` idle, %d app(s): the docker CLI process running it", w.Apps), mib(w.CLI), "MiB", bn, base, "")
	}
	s.extra("watch", b.watch)
	return nil
}
