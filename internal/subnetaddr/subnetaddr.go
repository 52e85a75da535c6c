// Package subnetaddr binds a listener to this machine's (or this
// container's) own address inside a subnet: on a swarm the edge's admin
// address and the certificate storage listen only on the control
// overlay, never on the app overlays the same container also joins.
package subnetaddr

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Parse splits "CIDR:PORT" (e.g. "10.0.9.0/24:9180") into the subnet and
// the port. ok is false for any other address ("HOST:PORT", ":PORT").
func Parse(addr string) (subnet netip.Prefix, port string, ok bool) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 || !strings.Contains(addr[:i], "/") {
		return netip.Prefix{}, "", false
	}
	p, err := netip.ParsePrefix(addr[:i])
	if err != nil {
		return netip.Prefix{}, "", false
	}
	return p.Masked(), addr[i+1:], true
}

// Resolve returns addr unchanged unless it is "CIDR:PORT"; then it is
// "IP:PORT" with IP this machine's interface address inside CIDR, waited
// for up to wait (an overlay's interface appears as the container
// starts). None within wait is an error naming the subnet.
func Resolve(ctx context.Context, addr string, wait time.Duration) (string, error) {
	subnet, port, ok := Parse(addr)
	if !ok {
		return addr, nil
	}
	deadline := time.Now().Add(wait)
	for {
		if ip, found := Local(subnet); found {
			return net.JoinHostPort(ip.String(), port), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no address of this container is inside %s (the control network): is it attached to that network?", subnet)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Local returns this machine's first interface address inside subnet.
func Local(subnet netip.Prefix) (netip.Addr, bool) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && subnet.Contains(ip.Unmap()) {
				return ip.Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}

// Within keeps the addresses of ips inside subnet (an edge's peers on
// the control network, not the same tasks' addresses on app overlays).
func Within(subnet netip.Prefix, ips []string) []string {
	var out []string
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s); err == nil && subnet.Contains(ip.Unmap()) {
			out = append(out, s)
		}
	}
	return out
}
