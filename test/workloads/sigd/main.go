// Command sigd is the signal and healthcheck test workload baked into
// gordon-test/sigd images (FROM scratch, static). The image declares
// HEALTHCHECK CMD ["/sigd", "health"] (every 1 s, 2 retries) and no
// STOPSIGNAL.
//
//	sigd [args...]     serve HTTP on $PORT (8080): / answers
//	                   "version=V instance=I args=A\n"; /crash exits 1 at once;
//	                   /healthz answers 200, or 503 after /sick was called
//	sigd health        the healthcheck: exit 1 with "unhealthy on purpose"
//	                   when HEALTH=fail, else GET /healthz on the listen port
//
// Signals: only the one named by EXIT_ON (default SIGTERM) stops it (exit
// 0 after logging "exiting on SIG..."); SIGTERM, SIGINT and SIGQUIT are
// otherwise logged and ignored, so only SIGKILL ends it.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(0)
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	if len(os.Args) > 1 && os.Args[1] == "health" {
		if os.Getenv("HEALTH") == "fail" {
			fmt.Println("unhealthy on purpose")
			os.Exit(1)
		}
		c := http.Client{Timeout: time.Second}
		resp, err := c.Get("http://127.0.0.1:" + port + "/healthz")
		if err != nil {
			fmt.Println("health:", err)
			os.Exit(1)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Println("unhealthy: /healthz answered", resp.Status)
			os.Exit(1)
		}
		fmt.Println("healthy:", resp.Status)
		return
	}
	exitOn := strings.ToUpper(os.Getenv("EXIT_ON"))
	if exitOn == "" {
		exitOn = "SIGTERM"
	}
	names := map[os.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT"}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT)
	go func() {
		for s := range sigs {
			if names[s] == exitOn {
				log.Printf("exiting on %s", names[s])
				os.Exit(0)
			}
			log.Printf("ignoring %s (exits only on %s)", names[s], exitOn)
		}
	}()
	instance := strconv.FormatInt(time.Now().UnixNano()^int64(os.Getpid())<<20, 36)
	version := os.Getenv("VERSION")
	args := strings.Join(os.Args[1:], ",")
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "version=%s instance=%s args=%s\n", version, instance, args)
	})
	var sick atomic.Bool
	mux.HandleFunc("/sick", func(w http.ResponseWriter, _ *http.Request) {
		sick.Store(true)
		fmt.Fprintln(w, "sick from now on")
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if sick.Load() {
			http.Error(w, "sick", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/crash", func(w http.ResponseWriter, _ *http.Request) {
		log.Printf("crashing on request")
		os.Exit(1)
	})
	log.Printf("sigd %s listening on :%s (exits on %s)", version, port, exitOn)
	log.Fatal(http.ListenAndServe(":"+port, mux))
}
