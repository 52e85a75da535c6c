// Command tcpecho is the TCP test workload baked into gordon-test/tcpecho
// images. It echoes every line it reads, prefixed with its version:
// "V: line\n". On SIGTERM it closes the listener (no new connections) and
// lets open connections finish until they close or it is killed.
//
//	-port PORT (9000)  -version VERSION ("dev")
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

func env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func main() {
	port := flag.String("port", env("PORT", "9000"), "listen port")
	version := flag.String("version", env("VERSION", "dev"), "reply prefix")
	flag.Parse()
	log.SetFlags(0)

	ln, err := net.Listen("tcp", ":"+*port)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-sigs
		log.Printf("received %s, closing listener", sig)
		_ = ln.Close()
	}()

	log.Printf("listening on :%s (version %s)", *port, *version)
	var wg sync.WaitGroup
	for {
		conn, err := ln.Accept()
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			sc := bufio.NewScanner(conn)
			for sc.Scan() {
				if _, err := fmt.Fprintf(conn, "%s: %s\n", *version, sc.Text()); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	log.Printf("stopped")
}
