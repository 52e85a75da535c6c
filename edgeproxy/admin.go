package edgeproxy

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
)

// adminHandler serves GET /status (live routetable.Status as JSON), GET
// /healthz ("ok"), GET /metrics, POST /reload and, with RoutesToken, PUT
// and GET /routes.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Status())
	})
	mux.Handle("GET /metrics", s.Metrics.Handler())
	// POST /reload re-reads the route table now instead of at the next
	// poll (traffic/edge calls it right after writing a table) and answers
	// with the outcome (serveReload, reload.go).
	mux.HandleFunc("POST /reload", s.serveReload)
	if s.push != nil {
		// PUT and GET /routes, with RoutesToken only (routepush.go).
		s.push.Register(mux)
	}
	if s.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
