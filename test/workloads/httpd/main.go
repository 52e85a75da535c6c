// Command httpd is the HTTP test workload baked into gordon-test/httpd
// images (FROM scratch, static). Every knob is a flag whose default comes
// from an environment variable, so tests can set either:
//
//	-port PORT (8080)              listen port
//	-version VERSION ("dev")       reported by / and /version
//	-drain DRAIN_DELAY (0)         on SIGTERM, keep serving this long, then Shutdown
//	-never-ready NEVER_READY       /healthz answers 503 forever
//	-exit-at-once EXIT_AT_ONCE     exit with status 3 right after start
//	-ignore-sigterm IGNORE_SIGTERM ignore SIGTERM (only SIGKILL stops it)
//	-ready-after READY_AFTER (0)   /healthz answers 503 until this long after start
//	-start-delay START_DELAY (0)   listen only this long after start (a slow-starting program)
//	-fail-root FAIL_ROOT           / (and /slow) answer 500 "failing" (/healthz is unaffected)
//	-get URL                       healthcheck mode: GET URL, exit 0 on 2xx, else 1 (serves nothing)
//
// Endpoints: / (200, "version=V host=H instance=I\n"; I is random per process; 500 with FAIL_ROOT), /version, /healthz, /hostname,
// /slow?d=5s (sleeps d, then answers like /).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func envBool(key string) bool {
	b, _ := strconv.ParseBool(os.Getenv(key))
	return b
}

func envDur(key string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(key))
	return d
}

func main() {
	port := flag.String("port", env("PORT", "8080"), "listen port")
	version := flag.String("version", env("VERSION", "dev"), "version reported by /")
	drain := flag.Duration("drain", envDur("DRAIN_DELAY"), "serve this long after SIGTERM before shutting down")
	neverReady := flag.Bool("never-ready", envBool("NEVER_READY"), "/healthz always 503")
	exitAtOnce := flag.Bool("exit-at-once", envBool("EXIT_AT_ONCE"), "exit 3 immediately")
	ignoreTerm := flag.Bool("ignore-sigterm", envBool("IGNORE_SIGTERM"), "ignore SIGTERM")
	failRoot := flag.Bool("fail-root", envBool("FAIL_ROOT"), "/ answers 500 (a broken release that still passes readiness)")
	readyAfter := flag.Duration("ready-after", envDur("READY_AFTER"), "healthz 503 until this long after start")
	startDelay := flag.Duration("start-delay", envDur("START_DELAY"), "listen only this long after start")
	get := flag.String("get", "", "GET this URL, exit 0 on a 2xx answer, else 1 (a healthcheck command)")
	flag.Parse()
	if *get != "" {
		c := &http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(*get)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			fmt.Fprintln(os.Stderr, resp.Status)
			os.Exit(1)
		}
		os.Exit(0)
	}

	log.SetFlags(0)
	if *exitAtOnce {
		log.Printf("exiting at once (version %s)", *version)
		os.Exit(3)
	}
	start := time.Now()
	host, _ := os.Hostname()
	instance := strconv.FormatInt(time.Now().UnixNano()^int64(os.Getpid())<<20, 36)

	// GREETING (the demo's [env]) leads the answer when set.
	greeting := ""
	if g := os.Getenv("GREETING"); g != "" {
		greeting = g + ": "
	}
	hello := func(w http.ResponseWriter, _ *http.Request) {
		if *failRoot {
			http.Error(w, fmt.Sprintf("failing version=%s instance=%s", *version, instance), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%sversion=%s host=%s instance=%s\n", greeting, *version, host, instance)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", hello)
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, *version) })
	mux.HandleFunc("/hostname", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, host) })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if *neverReady || time.Since(start) < *readyAfter {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil {
			d = time.Second
		}
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		hello(w, r)
	})

	srv := &http.Server{Addr: ":" + *port, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	sigs := make(chan os.Signal, 1)
	if !*ignoreTerm {
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	}
	done := make(chan struct{})
	go func() {
		sig := <-sigs
		log.Printf("received %s, draining for %s", sig, *drain)
		time.Sleep(*drain)
		if err := srv.Shutdown(context.Background()); err != nil {
			log.Printf("shutdown: %v", err)
		}
		close(done)
	}()

	delayStart(*startDelay)
	log.Printf("listening on :%s (version %s)", *port, *version)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("serve: %v", err)
	}
	<-done
	log.Printf("stopped")
}

// delayStart waits d (a program that listens d after it starts), saying so.
func delayStart(d time.Duration) {
	if d > 0 {
		log.Printf("starting: listening in %s", d)
		time.Sleep(d)
	}
}
