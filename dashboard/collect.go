package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// Collector reads one Snapshot through the CLI's own access. Store is
// required; every other source is optional, and one that fails is named
// in Snapshot.Problems while the rest is still shown.
type Collector struct {
	Store core.Store
	// Runtime, if set, gives the instances' state, health and uptime
	// (without it they are "unknown", as in `docker gordon status`).
	Runtime core.Runtime
	// Certs, if set, lists the edge's certificates.
	Certs func(ctx context.Context) ([]core.CertInfo, error)
	// Metrics, if set, returns the edge's /metrics text.
	Metrics func(ctx context.Context) ([]byte, error)
	// AccessLog, if set, writes the last lines of the edge's access log
	// (one JSON object a line, every app) to w.
	AccessLog func(ctx context.Context, w io.Writer) error
	// Sections, if set, returns the extra tables of an app's page.
	Sections func(ctx context.Context, app string) ([]Section, error)
	// Clock defaults to time.Now.
	Clock func() time.Time
	// Words, if set, rewrites a problem's text into the user's words (the
	// CLI drops the error classes); nil keeps it.
	Words func(string) string

	traffic traffic
}

// Collect reads every app's status, operations, traffic and access log
// lines, and the certificates. It fails only when the app list cannot be
// read. It is not safe for concurrent use (the Feed calls it from one
// goroutine): it keeps the edge's samples between calls.
func (c *Collector) Collect(ctx context.Context) (Snapshot, error) {
	now := time.Now
	if c.Clock != nil {
		now = c.Clock
	}
	snap := Snapshot{At: now().UTC()}
	names, err := c.Store.ListApps(ctx)
	if err != nil {
		return snap, fmt.Errorf("dashboard: list the apps in the state directory: %w", err)
	}
	eng := &engine.Engine{Store: c.Store, Runtime: c.Runtime}
	sts := make([]engine.AppStatus, 0, len(names))
	for _, name := range names {
		st, err := eng.Status(ctx, name)
		if errors.Is(err, core.ErrNotFound) {
			continue
		}
		if err != nil && st.State != engine.AppStateUnreadable {
			st.State, st.Problems = engine.AppStateUnreadable, []string{err.Error()}
		}
		sts = append(sts, st)
	}
	c.sampleTraffic(ctx, &snap, sts)
	access := c.readAccess(ctx, &snap)
	for _, st := range sts {
		a := App{Status: st, Access: access[st.App]}
		a.Ops = c.ops(ctx, st.App)
		serving := map[string]string{}
		for _, s := range st.Services {
			serving[s.Service] = s.Revision
		}
		a.Traffic = c.traffic.rates(st.App, serving)
		if c.Sections != nil {
			if a.Sections, err = c.Sections(ctx, st.App); err != nil {
				snap.Problems = append(snap.Problems, fmt.Sprintf("%s: %v", st.App, err))
			}
		}
		snap.Apps = append(snap.Apps, a)
	}
	if c.Certs != nil {
		if snap.Certs, err = c.Certs(ctx); err != nil {
			snap.Problems = append(snap.Problems, fmt.Sprintf("certificates: %v", err))
		}
	}
	if c.Words != nil {
		for i, p := range snap.Problems {
			snap.Problems[i] = c.Words(p)
		}
	}
	return snap, nil
}

// ops are app's operations, newest first, bounded as OpView says.
func (c *Collector) ops(ctx context.Context, app string) []OpView {
	ops, err := c.Store.ListOps(ctx, app)
	if err != nil {
		return nil
	}
	out := make([]OpView, 0, min(len(ops), MaxOps))
	for i := len(ops) - 1; i >= 0 && len(out) < MaxOps; i-- {
		v := OpView{Operation: ops[i], StepCount: len(ops[i].Steps)}
		if v.Verb == "" {
			v.Verb = v.Kind
		}
		if len(out) >= MaxOpSteps {
			v.Steps = nil
		}
		out = append(out, v)
	}
	return out
}

// sampleTraffic adds the edge's counters now to the samples, and learns
// which generation each backend address serves.
func (c *Collector) sampleTraffic(ctx context.Context, snap *Snapshot, sts []engine.AppStatus) {
	c.traffic.learn(snap.At, sts)
	if c.Metrics == nil {
		return
	}
	text, err := c.Metrics(ctx)
	if err != nil {
		snap.Problems = append(snap.Problems, fmt.Sprintf("traffic figures: %v", err))
		return
	}
	c.traffic.add(snap.At, parseMetrics(text))
}

// readAccess returns the access log's last lines per app, newest last.
func (c *Collector) readAccess(ctx context.Context, snap *Snapshot) map[string][]AccessLine {
	if c.AccessLog == nil {
		return nil
	}
	var buf bytes.Buffer
	if err := c.AccessLog(ctx, &buf); err != nil {
		snap.Problems = append(snap.Problems, fmt.Sprintf("access log: %v", err))
		return nil
	}
	out := map[string][]AccessLine{}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l AccessLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Method == "" || l.App == "" {
			continue
		}
		out[l.App] = append(out[l.App], l)
	}
	for app, lines := range out {
		sort.SliceStable(lines, func(i, j int) bool { return lines[i].Time.Before(lines[j].Time) })
		if len(lines) > MaxAccessLines {
			out[app] = lines[len(lines)-MaxAccessLines:]
		}
	}
	return out
}
