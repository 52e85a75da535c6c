// Command kv is the stateful test workload baked into gordon-test/kv images:
// a tiny HTTP key-value store persisted as JSON in DATA_DIR (default /data,
// a volume in tests) so a test can prove data survives deploys.
//
//	PUT /k/NAME (body = value) → 204; GET /k/NAME → 200 value | 404;
//	GET /healthz → 200; GET /version → VERSION.
//
// Every write is atomic (temp file + rename). It logs "ready" once listening.
// `/kv dump` (run by exec in a serving container: an online dump) writes
// the store's JSON to stdout and "kv: dumped N bytes" to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

func env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

type store struct {
	mu   sync.Mutex
	path string
	data map[string]string
}

func (s *store) load() error {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, &s.data)
}

func (s *store) save() error {
	b, err := json.Marshal(s.data)
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

func main() {
	log.SetFlags(0)
	port := env("PORT", "8080")
	version := env("VERSION", "dev")
	dir := env("DATA_DIR", "/data")
	if len(os.Args) == 2 && os.Args[1] == "dump" {
		b, err := os.ReadFile(filepath.Join(dir, "kv.json"))
		if err != nil {
			log.Fatalf("kv: dump: %v", err)
		}
		if _, err := os.Stdout.Write(b); err != nil {
			log.Fatalf("kv: dump: %v", err)
		}
		log.Printf("kv: dumped %d bytes", len(b))
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatalf("data dir: %v", err)
	}
	s := &store{path: filepath.Join(dir, "kv.json"), data: map[string]string{}}
	if err := s.load(); err != nil {
		log.Fatalf("load %s: %v", s.path, err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, version) })
	mux.HandleFunc("/k/", func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/k/")
		s.mu.Lock()
		defer s.mu.Unlock()
		switch r.Method {
		case http.MethodGet:
			v, ok := s.data[key]
			if !ok {
				http.NotFound(w, r)
				return
			}
			fmt.Fprint(w, v)
		case http.MethodPut, http.MethodPost:
			b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			s.data[key] = string(b)
			if err := s.save(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})

	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		<-sigs
		_ = srv.Shutdown(context.Background())
	}()
	log.Printf("ready: listening on :%s (version %s, %d keys)", port, version, len(s.data))
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("serve: %v", err)
	}
}
