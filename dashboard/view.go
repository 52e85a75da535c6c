package dashboard

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// view is what a page template renders.
type view struct {
	Snap    Snapshot
	CLI     string
	Engine  string
	Path    string
	Page    string // apps, app, op, missing
	App     *App
	Op      *OpView
	Missing string
	Filter  accessFilter
}

// accessFilter is the access log table's filter: Status is a class
// ("5xx") or a code ("404"), Path a prefix; "" matches all.
type accessFilter struct{ Status, Path string }

func (f accessFilter) keep(l AccessLine) bool {
	if f.Path != "" && !strings.HasPrefix(l.Path, f.Path) {
		return false
	}
	st := strings.ToLower(strings.TrimSpace(f.Status))
	switch {
	case st == "":
		return true
	case len(st) == 3 && strings.HasSuffix(st, "xx"):
		return strconv.Itoa(l.Status/100) == st[:1]
	}
	return strconv.Itoa(l.Status) == st
}

// Query is the filter as a query string ("" when none), for the event
// stream's address.
func (f accessFilter) Query() string {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.Path != "" {
		q.Set("path", f.Path)
	}
	return q.Encode()
}

// AccessShown is how many access log lines the app page shows at most
// (the filter searches the Snapshot's MaxAccessLines).
const AccessShown = 50

// AccessShown is the package's AccessShown, for the templates.
func (v *view) AccessShown() int { return AccessShown }

// AccessLines are the app's access log lines that pass the filter,
// newest first, at most AccessShown.
func (v *view) AccessLines() []AccessLine {
	if v.App == nil {
		return nil
	}
	var out []AccessLine
	for i := len(v.App.Access) - 1; i >= 0 && len(out) < AccessShown; i-- {
		if v.Filter.keep(v.App.Access[i]) {
			out = append(out, v.App.Access[i])
		}
	}
	return out
}

// LastOp is the app's latest operation when its steps are known (the
// app page shows them live while it runs).
func (v *view) LastOp() *OpView {
	if v.App == nil || len(v.App.Ops) == 0 || v.App.Ops[0].Steps == nil {
		return nil
	}
	return &v.App.Ops[0]
}

// AppCerts are the certificates of the hosts the app routes.
func (v *view) AppCerts() []core.CertInfo {
	if v.App == nil {
		return nil
	}
	var out []core.CertInfo
	for _, c := range v.Snap.Certs {
		for _, s := range v.App.Status.Services {
			if routesHost(s.Routes, c.Host) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// routesHost reports whether one of routes (as status spells them,
// "http://HOST -> :PORT") is host, or under the wildcard "*.suffix" host.
func routesHost(routes []string, host string) bool {
	for _, r := range routes {
		r, ok := strings.CutPrefix(r, "http://")
		if !ok {
			continue
		}
		r, _, _ = strings.Cut(r, " ")
		if r == host || strings.HasPrefix(host, "*.") && strings.HasSuffix(r, host[1:]) {
			return true
		}
	}
	return false
}

// Next are the CLI commands of what a user may want to do next on the
// page, most likely first.
func (v *view) Next() []string {
	c := v.CLI
	switch v.Page {
	case "apps":
		return []string{c + " deploy -f FILE", c + " status", c + " certs ls"}
	case "op":
		a, op := v.App.Status.App, v.Op
		out := []string{fmt.Sprintf("%s ops %s %s", c, a, op.ID)}
		if op.Outcome != "" && op.Outcome != core.OutcomeSuccess {
			out = append(out, fmt.Sprintf("%s status %s", c, a), fmt.Sprintf("%s rollback %s", c, a))
		}
		return append(out, fmt.Sprintf("%s logs %s", c, a))
	case "app":
		return appNext(c, v.App.Status)
	}
	return []string{c + " status"}
}

func appNext(c string, st engine.AppStatus) []string {
	a := st.App
	var out []string
	switch {
	case st.Maintenance != nil:
		out = append(out, fmt.Sprintf("%s maintenance off %s", c, a))
	case st.State == "asleep":
		out = append(out, fmt.Sprintf("%s wake %s", c, a))
	case st.Stopped:
		out = append(out, fmt.Sprintf("%s start %s", c, a))
	case st.State == engine.AppStateDegraded:
		out = append(out, fmt.Sprintf("%s restart %s", c, a))
	}
	if st.LastOp != nil && st.LastOp.Outcome != "" && st.LastOp.Outcome != core.OutcomeSuccess {
		out = append(out, fmt.Sprintf("%s ops %s %s", c, a, st.LastOp.ID))
	}
	return append(out, fmt.Sprintf("%s deploy %s", c, a), fmt.Sprintf("%s rollback %s", c, a),
		fmt.Sprintf("%s logs %s -f", c, a), fmt.Sprintf("%s logs %s --access", c, a))
}

// op returns the operation id (or an unique prefix) with its steps.
func (a *App) op(id string) *OpView {
	for i := range a.Ops {
		if a.Ops[i].ID == id && (a.Ops[i].Steps != nil || a.Ops[i].StepCount == 0) {
			return &a.Ops[i]
		}
	}
	return nil
}

// funcs are the templates' helpers.
func (s *Server) funcs() template.FuncMap {
	return template.FuncMap{
		"age":   age,
		"since": func(t, now time.Time) string { return dur(now.Sub(t)) },
		"dur":   dur,
		"short": shortID,
		"pct":   func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" },
		"num":   func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
		"spark": spark,
		"ready": ready,
		"verb":  func(o *engine.OpSummary) string { return cmpOr(o.Verb, o.Kind) },
		"addrs": func(ip string, b map[int]int) string { return addrs(ip, b) },
		"stepdur": func(st core.Step) string {
			if st.StartedAt.IsZero() || st.UpdatedAt.IsZero() {
				return "-"
			}
			return dur(st.UpdatedAt.Sub(st.StartedAt))
		},
		"opdur": func(op core.Operation, now time.Time) string {
			end := op.FinishedAt
			if end.IsZero() {
				end = now
			}
			return dur(end.Sub(op.StartedAt))
		},
		"phases": phases,
		"inc":    func(i int) int { return i + 1 },
		"cls":    stateClass,
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// age is "3m ago" from t to now ("-" for the zero time).
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return dur(now.Sub(t)) + " ago"
}

// dur is a duration in the largest two units that matter ("1h4m",
// "2m30s", "1.2s", "40ms").
func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	if id == "" {
		return "-"
	}
	return id
}

// ready is "2/3": instances serving of declared, for every service.
func ready(st engine.AppStatus) string {
	serving, declared := 0, 0
	for _, s := range st.Services {
		serving += s.Serving
		declared += max(s.Declared, 1)
	}
	return fmt.Sprintf("%d/%d", serving, declared)
}

// addrs is "10.0.0.2:8080, ..." for a bind map ("" IP: 127.0.0.1).
func addrs(ip string, binds map[int]int) string {
	if len(binds) == 0 {
		return "-"
	}
	if ip == "" {
		ip = "127.0.0.1"
	}
	var out []string
	for _, hp := range binds {
		out = append(out, ip+":"+strconv.Itoa(hp))
	}
	return strings.Join(out, ", ")
}

// phases is "create 120ms, probe 1.2s" in the deploy order.
func phases(p map[string]core.Duration) string {
	order := []string{"pull", "create", "start", "probe", "hook", "switch", "drain", "retire", "stop", "remove"}
	var out []string
	seen := map[string]bool{}
	for _, k := range order {
		if d, ok := p[k]; ok {
			out = append(out, k+" "+dur(time.Duration(d)))
			seen[k] = true
		}
	}
	for k, d := range p {
		if !seen[k] {
			out = append(out, k+" "+dur(time.Duration(d)))
		}
	}
	return strings.Join(out, ", ")
}

// stateClass is the CSS class of a state or outcome word.
func stateClass(s string) string {
	switch s {
	case "running", "success", "succeeded", "healthy", "valid", "done", "deployed":
		return "ok"
	case "failed", "degraded", "unreadable", "unhealthy", "exited", "missing", "partial", "dead":
		return "bad"
	case "", "pending", "starting", "running-op", "stopped", "asleep", "maintenance":
		return "warn"
	}
	return ""
}

// spark draws series as an inline SVG polyline (120×24), scaled to its
// maximum; nothing for fewer than two points.
func spark(series []float64) template.HTML {
	if len(series) < 2 {
		return ""
	}
	const w, h = 120.0, 24.0
	top := 0.0
	for _, v := range series {
		top = max(top, v)
	}
	var pts strings.Builder
	for i, v := range series {
		y := h - 1
		if top > 0 {
			y = h - 1 - (h-2)*v/top
		}
		fmt.Fprintf(&pts, "%.1f,%.1f ", w*float64(i)/float64(len(series)-1), y)
	}
	return template.HTML(fmt.Sprintf(`<svg class="spark" viewBox="0 0 120 24" width="120" height="24" role="img" aria-label="requests per second, last %d samples, peak %.1f"><polyline points="%s"/></svg>`,
		len(series), top, strings.TrimSpace(pts.String()))) // #nosec G203 -- numbers only
}
