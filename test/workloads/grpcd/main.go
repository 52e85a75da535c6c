// Command grpcd is the gRPC test workload baked into gordon-test/grpcd
// images (FROM scratch, static). It serves, on ONE port, both
// grpc.health.v1.Health (HTTP/2 cleartext, prior knowledge) and plain
// HTTP/1.1 for load through the edge:
//
//	-port PORT (8080)                  listen port
//	-version VERSION ("dev")           reported by /
//	-serving-after SERVING_AFTER (0)   health is NOT_SERVING until this long after start
//	-never-serving NEVER_SERVING       health stays NOT_SERVING forever
//	-service GRPC_SERVICE ("")         also report this named health service
//	-check                             client mode: one Health/Check against
//	                                   127.0.0.1:PORT, print the status, exit 0
//	                                   iff SERVING (1 otherwise, 2 on error);
//	                                   used by gordon-probe-exec tests
//
// HTTP endpoints: / (200, "version=V host=H instance=I\n"; I is random per
// process), /healthz (200 once SERVING, else 503). On SIGTERM it stops at once.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func main() {
	port := flag.String("port", env("PORT", "8080"), "listen port")
	version := flag.String("version", env("VERSION", "dev"), "version reported by /")
	servingAfter := flag.Duration("serving-after", envDur("SERVING_AFTER"), "NOT_SERVING until this long after start")
	neverServing := flag.Bool("never-serving", envBool("NEVER_SERVING"), "stay NOT_SERVING")
	service := flag.String("service", env("GRPC_SERVICE", ""), "named health service to report too")
	check := flag.Bool("check", false, "client mode: check 127.0.0.1:PORT and exit 0 iff SERVING")
	flag.Parse()
	log.SetFlags(0)

	if *check {
		os.Exit(runCheck(*port, *service))
	}

	hs := health.NewServer()
	setAll := func(st healthpb.HealthCheckResponse_ServingStatus) {
		hs.SetServingStatus("", st)
		if *service != "" {
			hs.SetServingStatus(*service, st)
		}
	}
	setAll(healthpb.HealthCheckResponse_NOT_SERVING)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)

	host, _ := os.Hostname()
	instance := strconv.FormatInt(time.Now().UnixNano()^int64(os.Getpid())<<20, 36)
	serving := make(chan struct{})
	if !*neverServing {
		go func() {
			time.Sleep(*servingAfter)
			setAll(healthpb.HealthCheckResponse_SERVING)
			close(serving)
			log.Printf("SERVING (version %s)", *version)
		}()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "version=%s host=%s instance=%s\n", *version, host, instance)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-serving:
			fmt.Fprintln(w, "ok")
		default:
			http.Error(w, "not serving", http.StatusServiceUnavailable)
		}
	})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			gs.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Addr: ":" + *port, Handler: handler, Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	go func() {
		<-sig
		log.Printf("signal: stopping")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		os.Exit(0)
	}()
	log.Printf("listening on :%s (version %s, serving after %s)", *port, *version, *servingAfter)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// runCheck is the -check client mode.
func runCheck(port, service string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println("check:", err)
		return 2
	}
	defer conn.Close()
	r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		fmt.Println("check:", err)
		return 2
	}
	fmt.Println("status:", r.GetStatus())
	if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return 1
	}
	return 0
}

func envBool(key string) bool {
	b, _ := strconv.ParseBool(os.Getenv(key))
	return b
}

func envDur(key string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(key))
	return d
}
