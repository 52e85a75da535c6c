package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	procfs "github.com/gordon-deploy/docker-gordon/bench/internal/proc"
)

// dashRun is `docker gordon dashboard` over a state directory of Apps
// apps: First is from its start to its first apps page (the first read of
// every app included), Page the median apps page once it runs, Gordon the
// VmRSS (KiB) of its docker-gordon process after the pages.
type dashRun struct {
	Apps        int
	First, Page time.Duration
	Gordon      int64
}

// dashPages is how many apps pages a dashboard run times.
const dashPages = 20

// measureDashboard starts the dashboard over state, times its apps page
// and reads its memory.
func (b *bench) measureDashboard(ctx context.Context, state string, apps int) (dashRun, error) {
	r := dashRun{Apps: apps}
	addr, err := freeAddr()
	if err != nil {
		return r, err
	}
	env := []string{"DOCKER_CONFIG=" + b.dockerConfig, "GORDON_STATE_DIR=" + state, "DOCKER_HOST=" + b.proxy.Host()}
	logPath := filepath.Join(b.tmp, fmt.Sprintf("dashboard-%d.log", apps))
	t0 := time.Now()
	p, _, err := startProc(fmt.Sprintf("dashboard-%d", apps), env, logPath, false, "docker", "gordon", "dashboard", "--addr", addr)
	if err != nil {
		return r, err
	}
	defer p.Stop()
	c := &http.Client{Timeout: 30 * time.Second}
	url := "http://" + addr + "/"
	for r.First == 0 {
		if time.Since(t0) > 60*time.Second || ctx.Err() != nil {
			return r, fmt.Errorf("the dashboard did not answer within 60 s (see %s)", logPath)
		}
		if code, _, err := httpGet(ctx, c, url, ""); err == nil && code == http.StatusOK {
			r.First = time.Since(t0)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ds []time.Duration
	for range dashPages {
		t := time.Now()
		code, _, err := httpGet(ctx, c, url, "")
		if err != nil || code != http.StatusOK {
			return r, fmt.Errorf("dashboard apps page: %d %v", code, err)
		}
		ds = append(ds, time.Since(t))
	}
	r.Page = median(ds)
	for _, pid := range append([]int{p.PID()}, descendants(p.PID())...) {
		if comm(pid) == "docker-gordon" && environOf(pid, "GORDON_PLUGIN") == "" {
			r.Gordon += procfs.RSSKiB(pid)
		}
	}
	logf("   dashboard, %d apps: first page %s after start, apps page %s (median of %d), docker-gordon %.1f MiB",
		apps, r.First.Round(time.Millisecond), r.Page.Round(time.Microsecond), dashPages, mib(r.Gordon))
	return r, nil
}

// reportDashboard adds the dashboard's figures beside their baseline, the
// same figure with 1 app.
func reportDashboard(s *section, runs []dashRun) {
	if len(runs) == 0 {
		return
	}
	one := runs[0]
	for _, d := range runs {
		s.add(fmt.Sprintf("`docker gordon dashboard` apps page, %d app(s) (median of %d)", d.Apps, dashPages), ms(d.Page), "ms", "dashboard, 1 app", ms(one.Page), "bound: 300 ms with 30 apps")
		s.add(fmt.Sprintf("`docker gordon dashboard` start to first apps page, %d app(s)", d.Apps), ms(d.First), "ms", "dashboard, 1 app", ms(one.First), "")
		s.add(fmt.Sprintf("`docker gordon dashboard`, %d app(s): docker-gordon VmRSS", d.Apps), mib(d.Gordon), "MiB", "dashboard, 1 app", mib(one.Gordon), "")
	}
	s.extra("dashboard", runs)
}
