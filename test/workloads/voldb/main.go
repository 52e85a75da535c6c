// Command voldb is the stateful test workload baked into gordon-test/voldb
// images (FROM scratch, static). The image declares VOLUME /data and
// STOPSIGNAL SIGQUIT, like a database image.
//
// It waits INIT_DELAY (default 1s, an "initdb") before listening on TCP
// $PORT (5432). Every connection gets one line
// "voldb version=V instance=I count=N\n", where N is a counter kept in
// /data/count and incremented per connection, so the count survives a new
// generation only when /data is the same volume. SIGQUIT, SIGINT and
// SIGTERM stop it (exit 0).
package main

import (
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(0)
	port := os.Getenv("PORT")
	if port == "" {
		port = "5432"
	}
	delay := time.Second
	if d, err := time.ParseDuration(os.Getenv("INIT_DELAY")); err == nil {
		delay = d
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT)
	go func() {
		s := <-sigs
		log.Printf("shutting down on %v", s)
		os.Exit(0)
	}()
	instance := strconv.FormatInt(time.Now().UnixNano()^int64(os.Getpid())<<20, 36)
	log.Printf("initializing for %s", delay)
	time.Sleep(delay)
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("voldb ready to accept connections on :%s", port)
	var mu sync.Mutex
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		mu.Lock()
		n := 0
		if b, err := os.ReadFile("/data/count"); err == nil {
			n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		n++
		werr := os.WriteFile("/data/count", []byte(strconv.Itoa(n)), 0o644)
		mu.Unlock()
		if werr != nil {
			fmt.Fprintf(c, "voldb error: %v\n", werr)
		} else {
			fmt.Fprintf(c, "voldb version=%s instance=%s count=%d\n", os.Getenv("VERSION"), instance, n)
		}
		c.Close()
	}
}
