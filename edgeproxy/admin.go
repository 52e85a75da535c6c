package edgeproxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// adminHandler serves GET /status (live routetable.Status as JSON), GET
// /healthz ("ok"), GET /metrics, GET /wakes and GET /activity (SPEC R81), POST /reload and, with RoutesToken, PUT
// and GET /routes; every one but /healthz and /routes (which checks the
// routes token itself) behind requireAdminToken.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Status())
	})
	mux.Handle("GET /metrics", s.Metrics.Handler())
	// GET /wakes is the watcher's long poll for the services requests
	// asked to wake (SPEC R81).
	mux.HandleFunc("GET /wakes", s.wakes.ServeWakes)
	mux.HandleFunc("GET /activity", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.activity.Sample(s.Snap.Load(), s.Reg.Status(), s.tcp.LastAccept))
	})
	// POST /reload re-reads the route table now instead of at the next
	// poll (traffic/edge calls it right after writing a table) and answers
	// with the outcome (serveReload, reload.go).
	mux.HandleFunc("POST /reload", s.serveReload)
	if s.push != nil {
		// PUT and GET /routes, with RoutesToken only (routepush.go).
		s.push.Register(mux)
	}
	if s.cfg.Control != nil {
		mux.HandleFunc("PUT /control", s.cfg.Control.ServeUpdate)
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
	return s.requireAdminToken(mux)
}

// requireAdminToken answers 401 to an admin request without "Bearer
// <AdminToken>" or "Bearer <RoutesToken>" (Config.AdminToken), except GET
// /healthz and /routes. With neither token configured it lets every
// request through (a loopback admin address: checkAdminAccess).
func (s *Server) requireAdminToken(next http.Handler) http.Handler {
	var accepted [][sha256.Size]byte
	for _, tok := range []string{s.cfg.AdminToken, s.cfg.RoutesToken} {
		if tok != "" {
			accepted = append(accepted, sha256.Sum256([]byte(tok)))
		}
	}
	if len(accepted) == 0 && s.cfg.Control == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/routes" {
			next.ServeHTTP(w, r)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok {
			// Hashed first: the comparison takes the same time whatever
			// the presented token.
			if s.cfg.Control != nil && s.cfg.Control.AcceptsPush(strings.TrimSpace(tok)) {
				next.ServeHTTP(w, r)
				return
			}
			got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
			for _, want := range accepted {
				if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
					next.ServeHTTP(w, r)
					return
				}
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="gordon-edge admin"`)
		http.Error(w, "missing or wrong admin token (<state>/edge/"+edgestate.AdminTokenFile+")", http.StatusUnauthorized)
	})
}
