package dashboard

import (
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// Snapshot is everything the pages show, read at At. It is what a remote
// feed sends, one JSON line per change.
type Snapshot struct {
	At   time.Time `json:"at"`
	Apps []App     `json:"apps"`
	// Certs are the edge's HTTPS certificates, sorted by host (none when
	// the traffic backend holds none or could not be asked).
	Certs []core.CertInfo `json:"certs,omitempty"`
	// Problems are the sources that could not be read, one line each in
	// the user's words (the edge is not running, the runtime is
	// unavailable); the pages show them above everything.
	Problems []string `json:"problems,omitempty"`
	// Seq counts the Feed's snapshots (1 is the first).
	Seq uint64 `json:"seq"`
}

// App is one app's part of a Snapshot.
type App struct {
	Status engine.AppStatus `json:"status"`
	// Ops are the app's operations, newest first, at most MaxOps; only
	// the first MaxOpSteps carry their steps (the others have Steps nil
	// and StepCount set).
	Ops []OpView `json:"ops,omitempty"`
	// Traffic is the edge's figures per service and generation over the
	// last Window, sorted by service then newest generation first.
	Traffic []Rate `json:"traffic,omitempty"`
	// Access are the app's last access log lines, newest last, at most
	// MaxAccessLines.
	Access []AccessLine `json:"access,omitempty"`
	// Sections are further tables of the app (Collector.Sections): the
	// place for volume snapshots and scheduled jobs.
	Sections []Section `json:"sections,omitempty"`
}

// OpView is an operation with the number of its steps, for the lists
// that leave the steps out.
type OpView struct {
	core.Operation
	StepCount int `json:"step_count"`
}

// Rate is one generation of one service as the edge counted it over the
// last Window: Revision is the generation ("" when the edge's backend is
// no longer known to any status the Feed saw), Backends its instances'
// addresses. RPS is requests per second, ErrorRate the share of 5xx and
// proxy errors (0..1), P50 and P99 the latency quantiles in milliseconds
// (0 when no request was seen). Series is RPS per sample, oldest first,
// for the sparkline.
type Rate struct {
	Service   string    `json:"service"`
	Revision  string    `json:"revision"`
	Backends  []string  `json:"backends"`
	Requests  int64     `json:"requests"`
	RPS       float64   `json:"rps"`
	ErrorRate float64   `json:"error_rate"`
	P50       float64   `json:"p50_ms"`
	P99       float64   `json:"p99_ms"`
	Series    []float64 `json:"series,omitempty"`
	Serving   bool      `json:"serving"`
}

// AccessLine is one line of the edge's access log.
type AccessLine struct {
	Time       time.Time `json:"time"`
	Host       string    `json:"host,omitempty"`
	Method     string    `json:"method"`
	Path       string    `json:"path"`
	Status     int       `json:"status"`
	DurationMS float64   `json:"duration_ms"`
	App        string    `json:"app,omitempty"`
	Service    string    `json:"service,omitempty"`
	Instance   string    `json:"instance,omitempty"`
	Client     string    `json:"client,omitempty"`
}

// Section is a titled table an extension adds to the app page: Columns
// are the header cells, Rows the body (each row as many cells), Empty
// what the page says when Rows is empty, and Command the CLI command the
// section's next action is, without the CLI itself ("snapshots ls blog":
// the page prefixes "docker gordon" or "docker --context X gordon").
type Section struct {
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows,omitempty"`
	Empty   string     `json:"empty,omitempty"`
	Command string     `json:"command,omitempty"`
}

// Bounds of a Snapshot.
const (
	MaxOps         = 30
	MaxOpSteps     = 10
	MaxAccessLines = 200
	// Window is how far back the traffic figures reach.
	Window = 5 * time.Minute
)

// app returns the app named name, or nil.
func (s *Snapshot) app(name string) *App {
	for i := range s.Apps {
		if s.Apps[i].Status.App == name {
			return &s.Apps[i]
		}
	}
	return nil
}
