package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// Rendering lives only here (STYLE "What we take" 14): tables and JSON on
// stdout, progress on stderr.

func addFormatFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().Var(formatValue{p}, "format", `output format: "table" (default) or "json"`)
}

// formatValue is --format: "", "table" or "json" (any case); anything else
// is a usage error instead of a silent table.
type formatValue struct{ p *string }

func (f formatValue) String() string {
	if f.p == nil {
		return ""
	}
	return *f.p
}

func (f formatValue) Set(s string) error {
	switch strings.ToLower(s) {
	case "", "table", "json":
		*f.p = s
		return nil
	}
	return fmt.Errorf(`want "table" or "json"`)
}

func (f formatValue) Type() string { return "string" }

func isJSON(format string) bool { return strings.EqualFold(format, "json") }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// progressRenderer prints engine progress events to stderr: one line per
// phase per service with elapsed time. On a terminal the current line of a
// service redraws in place; in logs every event is its own plain line.
type progressRenderer struct {
	mu      sync.Mutex
	w       io.Writer
	tty     bool
	start   time.Time
	lastKey string
	// since is when each app/service's first event said its work started:
	// events that carry no elapsed time of their own (stop and remove of a
	// retirement) continue that service's clock instead of restarting it.
	since map[string]time.Time
}

func newProgressRenderer(w io.Writer, tty bool) *progressRenderer {
	return &progressRenderer{w: w, tty: tty, start: time.Now()}
}

func (p *progressRenderer) event(ev engine.ProgressEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev.Elapsed = p.elapsed(ev)
	line := fmt.Sprintf("%-12s %-10s %6.1fs", ev.Service, ev.Phase, ev.Elapsed.Seconds())
	if ev.Service == "" {
		line = fmt.Sprintf("%-12s %-10s %6.1fs", ev.App, ev.Phase, ev.Elapsed.Seconds())
	}
	if ev.Attempt > 0 {
		line += fmt.Sprintf("  attempt %d", ev.Attempt)
		if ev.Phase == engine.PhaseProbe && !ev.Done {
			// Reported only for attempts that were not ready: normal
			// while the candidate starts, not an error.
			line += ": not ready yet, retrying;"
		}
	}
	if ev.Detail != "" {
		line += "  " + shortenIDs(ev.Detail)
	}
	key := ev.Service + "/" + string(ev.Phase)
	if p.tty {
		// A hook's output lines each keep their own line (R72).
		if key == p.lastKey && !ev.Done && ev.Phase != engine.PhaseHook {
			fmt.Fprintf(p.w, "\r\033[K%s", line)
			return
		}
		if p.lastKey != "" {
			fmt.Fprint(p.w, "\n")
		}
		fmt.Fprint(p.w, line)
		p.lastKey = key
		if ev.Done {
			fmt.Fprint(p.w, "\n")
			p.lastKey = ""
		}
		return
	}
	// In logs, a long readiness wait prints its first attempts and then
	// every tenth, not one line a second.
	if ev.Phase == engine.PhaseProbe && ev.Attempt > 3 && ev.Attempt%10 != 0 {
		return
	}
	fmt.Fprintln(p.w, line)
}

// finish ends a pending redrawn line.
func (p *progressRenderer) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.lastKey != "" {
		fmt.Fprint(p.w, "\n")
		p.lastKey = ""
	}
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

var longID = regexp.MustCompile(`\b[0-9a-f]{64}\b`)

// shortenIDs replaces 64-hex container and image IDs with their 12-char form.
func shortenIDs(s string) string {
	return longID.ReplaceAllStringFunc(s, func(id string) string { return id[:12] })
}

// elapsed is ev's time on its service's clock: never less than the time
// since the service's first event (minus that event's own elapsed time).
// Caller holds p.mu.
func (p *progressRenderer) elapsed(ev engine.ProgressEvent) time.Duration {
	if p.since == nil {
		p.since = map[string]time.Time{}
	}
	key := ev.App + "/" + ev.Service
	now := time.Now()
	start, ok := p.since[key]
	if !ok {
		start = now.Add(-ev.Elapsed)
		p.since[key] = start
	}
	return max(ev.Elapsed, now.Sub(start))
}
