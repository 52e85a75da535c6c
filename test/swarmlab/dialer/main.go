// Command dialer is the swarm lab's stand-in for a compromised app
// container: an HTTP server on :8080 whose GET /dial?addr=IP:PORT tries a
// TCP connection from inside the container (1 s) and answers
// "connected" or "failed: <error>"; GET /healthz answers ok.
package main

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

func main() {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "dialer") })
	mux.HandleFunc("/dial", func(w http.ResponseWriter, r *http.Request) {
		c, err := net.DialTimeout("tcp", r.URL.Query().Get("addr"), time.Second)
		if err != nil {
			fmt.Fprintf(w, "failed: %v\n", err)
			return
		}
		_ = c.Close()
		fmt.Fprintln(w, "connected")
	})
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		panic(err)
	}
}
