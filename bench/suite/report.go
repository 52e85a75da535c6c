package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// report is bench/report.json; bench/report.md renders the same data.
type report struct {
	Title    string     `json:"title"`
	Date     string     `json:"date"`
	Commit   string     `json:"commit"`
	Machine  machine    `json:"machine"`
	Elapsed  string     `json:"elapsed"`
	Sections []*section `json:"sections"`
}

type machine struct {
	CPUModel       string `json:"cpu_model"`
	CPUs           int    `json:"cpus"`
	MemTotalMiB    int64  `json:"mem_total_mib"`
	Kernel         string `json:"kernel"`
	DockerServer   string `json:"docker_server"`
	DockerAPI      string `json:"docker_api"`
	DockerCLI      string `json:"docker_cli"`
	GoVersion      string `json:"go_version"`
	LoadAvgAtStart string `json:"loadavg_at_start"`
}

// section is one measurement: a table of figures, each with its baseline
// (measured in the same run unless the baseline says otherwise) and ratio.
type section struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Method   string   `json:"method"`
	Baseline string   `json:"baseline"`
	Figures  []figure `json:"figures"`
	Notes    []string `json:"notes,omitempty"`
	// Extra is machine-readable detail (samples, per-endpoint counts).
	Extra map[string]any `json:"extra,omitempty"`
	Error string         `json:"error,omitempty"`
}

// figure is one number. Ratio = Value / BaseValue (NaN-free: 0 when the
// baseline is 0, with RatioNote saying so).
type figure struct {
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`
	Baseline  string  `json:"baseline"`
	BaseValue float64 `json:"baseline_value"`
	Ratio     float64 `json:"ratio"`
	Note      string  `json:"note,omitempty"`
}

func (s *section) add(name string, value float64, unit, baseline string, base float64, note string) {
	f := figure{Name: name, Value: value, Unit: unit, Baseline: baseline, BaseValue: base, Note: note}
	if base != 0 && !math.IsNaN(value) {
		f.Ratio = value / base
	}
	s.Figures = append(s.Figures, f)
}

func (s *section) note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

func (s *section) extra(k string, v any) {
	if s.Extra == nil {
		s.Extra = map[string]any{}
	}
	s.Extra[k] = v
}

func fmtVal(v float64, unit string) string {
	switch unit {
	case "ms":
		if v >= 100 {
			return fmt.Sprintf("%.0f ms", v)
		}
		return fmt.Sprintf("%.1f ms", v)
	case "count", "calls", "requests":
		return fmt.Sprintf("%s %s", group(int64(math.Round(v))), unit)
	case "MiB":
		return fmt.Sprintf("%.1f MiB", v)
	case "req/s":
		return fmt.Sprintf("%s req/s", group(int64(math.Round(v))))
	case "%":
		return fmt.Sprintf("%.1f %%", v)
	default:
		return fmt.Sprintf("%.3g %s", v, unit)
	}
}

// group formats n with thousands separators.
func group(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtRatio(f figure) string {
	if f.BaseValue == 0 {
		if f.Value == 0 {
			return "—"
		}
		return "∞"
	}
	return fmt.Sprintf("%.2f×", f.Ratio)
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", r.Title)
	fmt.Fprintf(&b, "- date: %s (suite wall time %s)\n", r.Date, r.Elapsed)
	fmt.Fprintf(&b, "- commit: %s\n", r.Commit)
	m := r.Machine
	fmt.Fprintf(&b, "- machine: %d × %s, %d MiB RAM, Linux %s, load average at start %s\n", m.CPUs, m.CPUModel, m.MemTotalMiB, m.Kernel, m.LoadAvgAtStart)
	fmt.Fprintf(&b, "- Docker engine %s (API %s), docker CLI %s, %s\n\n", m.DockerServer, m.DockerAPI, m.DockerCLI, m.GoVersion)
	b.WriteString("Absolute times are noisy on this shared 2-core machine: every figure has a baseline measured in the same run and the ratio value ÷ baseline. Medians unless a row says otherwise. Regenerate with `make bench`; the raw samples are in `bench/report.json`.\n")
	for _, s := range r.Sections {
		fmt.Fprintf(&b, "\n## %s\n\n", s.Title)
		if s.Method != "" {
			fmt.Fprintf(&b, "%s\n\n", s.Method)
		}
		if s.Baseline != "" {
			fmt.Fprintf(&b, "Baseline: %s\n\n", s.Baseline)
		}
		if s.Error != "" {
			fmt.Fprintf(&b, "**Not measured: %s**\n\n", s.Error)
		}
		if len(s.Figures) > 0 {
			b.WriteString("| figure | value | baseline | baseline value | ratio |\n|---|---:|---|---:|---:|\n")
			for _, f := range s.Figures {
				name := f.Name
				if f.Note != "" {
					name += " (" + f.Note + ")"
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, fmtVal(f.Value, f.Unit), f.Baseline, fmtVal(f.BaseValue, f.Unit), fmtRatio(f))
			}
		}
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "\n- %s", n)
		}
		if len(s.Notes) > 0 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func (r *report) write(dir string) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(dir+"/report.json", append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(dir+"/report.md", []byte(r.markdown()), 0o644)
}

// describeMachine fills what it can; missing pieces stay empty.
func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kib int64
				fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kib)
				m.MemTotalMiB = kib / 1024
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			m.LoadAvgAtStart = strings.Join(f[:3], " ")
		}
	}
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}|{{.Server.APIVersion}}|{{.Client.Version}}").Output(); err == nil {
		p := strings.Split(strings.TrimSpace(string(out)), "|")
		if len(p) == 3 {
			m.DockerServer, m.DockerAPI, m.DockerCLI = p[0], p[1], p[2]
		}
	}
	return m
}

func commitOf(repo string) string {
	out, err := exec.Command("git", "-C", repo, "describe", "--always", "--dirty", "--abbrev=12").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if full, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output(); err == nil {
		c += " (" + strings.TrimSpace(string(full)) + ")"
	}
	return c
}

func nowDate() string { return time.Now().UTC().Format("2006-01-02 15:04 MST") }
