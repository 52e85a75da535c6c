package main

import (
	"net"
	"time"

	"github.com/gordon-deploy/docker-gordon/test/loadgen"
)

// loadResult is one closed-loop run against one target (loadgen.RunRaw:
// raw HTTP/1.1 over net.Conn, so the generator itself costs little CPU).
type loadResult = loadgen.RawResult

// mergeResults combines runs of one target: requests, errors and elapsed
// time add up, percentiles are over every request of every run.
func mergeResults(runs []loadResult) loadResult { return loadgen.MergeRaw(runs) }

// runLoad drives addr with conns keep-alive HTTP/1.1 clients in a closed
// loop (each sends the next request when the previous response was read)
// for d, and returns throughput and latency percentiles; responses must
// carry Content-Length.
func runLoad(addr, host string, conns int, d time.Duration) (loadResult, error) {
	return loadgen.RunRaw(loadgen.RawConfig{Addr: addr, Host: host, Conns: conns, Duration: d})
}

// dialer opens connections to addr (e.g. TLS).
type dialer struct {
	addr string
	dial func() (net.Conn, error)
}

// runLoadDial is runLoad over connections from d; with oneShot every
// request goes on a new connection (Connection: close), so the figure is
// connections (TLS handshakes) per second.
func runLoadDial(d dialer, host string, conns int, dur time.Duration, oneShot bool) (loadResult, error) {
	return loadgen.RunRaw(loadgen.RawConfig{Addr: d.addr, Dial: d.dial, Host: host, Conns: conns, Duration: dur, OneShot: oneShot})
}
