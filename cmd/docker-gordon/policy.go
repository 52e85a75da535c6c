package main

import (
	"context"
	"net"
)

// checkPort is engine.PortChecker: it binds addr for an instant, so a publish
// address another process holds fails preflight instead of leaving the edge
// unable to listen (R13 port reservation re-check).
func checkPort(_ context.Context, proto, addr string) error {
	if proto == "udp" {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}
