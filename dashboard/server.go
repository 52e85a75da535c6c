package dashboard

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Server serves the pages of the Feed's latest Snapshot. It changes
// nothing: every page names the CLI command of the next action.
type Server struct {
	Feed *Feed
	// Token, if set, is required of every request (see requireToken).
	Token string
	// CLI is how the commands the pages show start: "docker gordon", or
	// "docker --context prod gordon" for a remote engine.
	CLI string
	// Engine names the engine the pages are about (the header shows it).
	Engine string
	// Heartbeat is how often an idle event stream gets a comment, so a
	// client that went away is noticed (default 15 s).
	Heartbeat time.Duration
	// Wait bounds how long a page waits for the first Snapshot (default
	// 30 s).
	Wait time.Duration

	tmpl *template.Template
}

// Handler returns the dashboard's routes: / (apps), /app/NAME,
// /app/NAME/op/ID, /events (server-sent events of a page's live part)
// and /static/.
func (s *Server) Handler() (http.Handler, error) {
	t, err := template.New("").Funcs(s.funcs()).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	s.tmpl = t
	static, _ := fs.Sub(assets, "assets/static")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /app/{app}", s.page)
	mux.HandleFunc("GET /app/{app}/op/{op}", s.page)
	mux.HandleFunc("GET /events", s.events)
	var h http.Handler = mux
	if s.Token != "" {
		h = requireToken(s.Token, h)
	} else {
		h = loopbackHostOnly(h)
	}
	return secureHeaders(h), nil
}

// secureHeaders: no framing, no sniffing, scripts and styles from here
// only.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// page renders the full page of r's path.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	v, code, err := s.view(r.Context(), r.URL.Path, r.URL.Query().Get("status"), r.URL.Query().Get("path"))
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, "layout", v); err != nil {
		http.Error(w, "dashboard: render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// view is the page model of path, with the HTTP status to answer.
func (s *Server) view(ctx context.Context, path, status, pathFilter string) (*view, int, error) {
	wait := s.Wait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	snap, err := s.Feed.Latest(wctx)
	if err != nil {
		return nil, http.StatusServiceUnavailable, err
	}
	v := &view{Snap: snap, CLI: s.cli(), Engine: s.Engine, Path: path, Filter: accessFilter{Status: status, Path: pathFilter}}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/" || path == "":
		v.Page = "apps"
		return v, http.StatusOK, nil
	case len(parts) >= 2 && parts[0] == "app":
		v.App = snap.app(parts[1])
		if v.App == nil {
			v.Page, v.Missing = "missing", fmt.Sprintf("app %q is not in the state directory", parts[1])
			return v, http.StatusNotFound, nil
		}
		v.Page = "app"
		if len(parts) == 4 && parts[2] == "op" {
			v.Page = "op"
			if v.Op = v.App.op(parts[3]); v.Op == nil {
				v.Page, v.Missing = "missing", fmt.Sprintf("operation %s of app %s is not among its last %d with steps", parts[3], parts[1], MaxOpSteps)
				return v, http.StatusNotFound, nil
			}
		}
		return v, http.StatusOK, nil
	}
	return nil, http.StatusNotFound, errors.New("404: no such page (the apps are at /)")
}

func (s *Server) cli() string {
	if s.CLI == "" {
		return "docker gordon"
	}
	return s.CLI
}

// events streams a page's live part (?page=PATH plus the page's own
// query) as server-sent events: one "live" event at once and one after
// each new Snapshot, the data the live part's HTML. It ends when the
// client goes away, leaving nothing behind.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "dashboard: streaming unsupported", http.StatusInternalServerError)
		return
	}
	q := r.URL.Query()
	page, status, pathFilter := q.Get("page"), q.Get("status"), q.Get("path")
	wake, cancel := s.Feed.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	hb := s.Heartbeat
	if hb <= 0 {
		hb = 15 * time.Second
	}
	beat := time.NewTicker(hb)
	defer beat.Stop()
	ctx := r.Context()
	var sent uint64
	for {
		v, _, err := s.view(ctx, page, status, pathFilter)
		if err != nil {
			return
		}
		if v.Snap.Seq != sent {
			sent = v.Snap.Seq
			var buf bytes.Buffer
			if err := s.tmpl.ExecuteTemplate(&buf, "live", v); err != nil {
				return
			}
			if writeEvent(w, "live", sent, buf.Bytes()) != nil {
				return
			}
			fl.Flush()
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": beat\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// writeEvent writes one server-sent event, each line of data its own
// "data:" field.
func writeEvent(w http.ResponseWriter, name string, id uint64, data []byte) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "event: %s\nid: %d\n", name, id)
	for _, line := range bytes.Split(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(bytes.TrimRight(line, "\r"))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// Serve serves h on ln until ctx ends, then shuts down (open event
// streams end with their requests' contexts).
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
