package edgeproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// ErrInvalidTable is wrapped by every route table rejection. The edge does
// not import core (ARCHITECTURE §2: it shares only package routetable); the
// traffic/edge plugin maps a rejection it reads from status.json to
// core.ErrInvalid.
var ErrInvalidTable = errors.New("invalid route table")

// LoadTable strictly decodes and validates one edge/routes.json document
// (ARCHITECTURE §5, STYLE "What we take" 12). Rules:
//   - exactly one JSON object, unknown fields rejected, schema must equal
//     routetable.Schema;
//   - every HTTP host is a DNS name ("example.com") or a wildcard
//     ("*.example.com"), compared case-insensitively; no host twice;
//   - every HTTP route has at least one backend unless it is held or
//     stopped (then it has none; SPEC R58), optional timeouts are
//     within 0..3600000 ms, every backend and L4
//     backend is "IP:port" with a port in 1..65535;
//   - every TCP/UDP listen is "[IP]:port" with a port in 1..65535; no listen
//     twice within one protocol; a held route is TCP and has no backend.
//
// Hosts are returned lowercased. Errors wrap ErrInvalidTable and name the
// offending route.
func LoadTable(data []byte) (routetable.Table, error) {
	var t routetable.Table
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return routetable.Table{}, fmt.Errorf("route table: decode: %w: %w", ErrInvalidTable, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return routetable.Table{}, fmt.Errorf("route table: trailing data after the JSON object: %w", ErrInvalidTable)
	}
	if err := ValidateTable(&t); err != nil {
		return routetable.Table{}, err
	}
	return t, nil
}

// ValidateTable checks t by the rules of LoadTable and lowercases its HTTP
// hosts in place. Errors wrap ErrInvalidTable.
func ValidateTable(t *routetable.Table) error {
	if t.Schema != routetable.Schema {
		return fmt.Errorf("route table: schema %d, this edge reads schema %d: %w", t.Schema, routetable.Schema, ErrInvalidTable)
	}
	hosts := make(map[string]struct{}, len(t.HTTP))
	for i := range t.HTTP {
		r := &t.HTTP[i]
		host := strings.ToLower(r.Host)
		if err := validateHost(host); err != nil {
			return fmt.Errorf("route table: http route %d (app %q, service %q): host %q: %w", i, r.App, r.Service, r.Host, err)
		}
		if _, dup := hosts[host]; dup {
			return fmt.Errorf("route table: http host %q routed twice (app %q, service %q): %w", host, r.App, r.Service, ErrInvalidTable)
		}
		hosts[host] = struct{}{}
		r.Host = host
		if r.DialTimeoutMS < 0 || r.DialTimeoutMS > maxRouteTimeoutMS || r.ResponseHeaderTimeoutMS < 0 || r.ResponseHeaderTimeoutMS > maxRouteTimeoutMS {
			return fmt.Errorf("route table: http host %q (app %q, service %q): timeouts must be within 0..%d ms: %w", host, r.App, r.Service, maxRouteTimeoutMS, ErrInvalidTable)
		}
		if n := btoi(r.Hold != nil) + btoi(r.Stopped) + btoi(r.Unavailable) + btoi(r.Asleep != nil); n > 1 {
			return fmt.Errorf("route table: http host %q (app %q, service %q) is more than one of held, stopped, unavailable, asleep: %w", host, r.App, r.Service, ErrInvalidTable)
		}
		if (r.Hold != nil || r.Stopped || r.Unavailable || r.Asleep != nil) && len(r.Backends) > 0 {
			return fmt.Errorf("route table: http host %q (app %q, service %q): a held, stopped, unavailable or asleep route has no backends: %w", host, r.App, r.Service, ErrInvalidTable)
		}
		if r.Hold != nil && r.Hold.Queue < 0 {
			return fmt.Errorf("route table: http host %q (app %q, service %q): hold queue must be >= 0: %w", host, r.App, r.Service, ErrInvalidTable)
		}
		if err := validateRouteTLS(r); err != nil {
			return err
		}
		if err := validateRoutePolicy(r); err != nil {
			return err
		}
		if len(r.Backends) == 0 && r.Hold == nil && !r.Stopped && !r.Unavailable && r.Asleep == nil {
			return fmt.Errorf("route table: http host %q (app %q, service %q) has no backends: %w", host, r.App, r.Service, ErrInvalidTable)
		}
		for _, b := range r.Backends {
			if err := validateAddr(b.Addr, true); err != nil {
				return fmt.Errorf("route table: http host %q (app %q, service %q, container %q): backend %q: %w", host, r.App, r.Service, b.Container, b.Addr, err)
			}
		}
	}
	for proto, routes := range map[string][]routetable.L4Route{"tcp": t.TCP, "udp": t.UDP} {
		listens := make(map[string]struct{}, len(routes))
		for i, r := range routes {
			if err := validateAddr(r.Listen, false); err != nil {
				return fmt.Errorf("route table: %s route %d (app %q, service %q): listen %q: %w", proto, i, r.App, r.Service, r.Listen, err)
			}
			if _, dup := listens[r.Listen]; dup {
				return fmt.Errorf("route table: %s listen %q used twice (app %q, service %q): %w", proto, r.Listen, r.App, r.Service, ErrInvalidTable)
			}
			listens[r.Listen] = struct{}{}
			if r.IdleTimeoutMS < 0 || r.IdleTimeoutMS > maxRelayIdleMS || r.MaxConns < 0 || r.MaxConns > maxRelayConns {
				return fmt.Errorf("route table: %s listen %q (app %q, service %q): idle_timeout_ms must be within 0..%d and max_conns within 0..%d: %w",
					proto, r.Listen, r.App, r.Service, maxRelayIdleMS, maxRelayConns, ErrInvalidTable)
			}
			if r.Asleep != nil {
				if proto != "tcp" || r.Backend != "" || r.Hold != nil {
					return fmt.Errorf("route table: %s listen %q (app %q, service %q): only a TCP route sleeps, without a backend or a hold: %w", proto, r.Listen, r.App, r.Service, ErrInvalidTable)
				}
				continue
			}
			if r.Hold != nil {
				if proto != "tcp" || r.Backend != "" || r.Hold.Queue < 0 {
					return fmt.Errorf("route table: %s listen %q (app %q, service %q): only a TCP route is held, without a backend, queue >= 0: %w", proto, r.Listen, r.App, r.Service, ErrInvalidTable)
				}
				continue
			}
			if err := validateAddr(r.Backend, true); err != nil {
				return fmt.Errorf("route table: %s listen %q (app %q, service %q, container %q): backend %q: %w", proto, r.Listen, r.App, r.Service, r.Container, r.Backend, err)
			}
			if len(r.Backends) > 0 && (r.Backends[0].Addr != r.Backend || proto == "udp" && len(r.Backends) > 1) {
				return fmt.Errorf("route table: %s listen %q (app %q, service %q): backends must start with backend %q, and a UDP route has one: %w", proto, r.Listen, r.App, r.Service, r.Backend, ErrInvalidTable)
			}
			for _, b := range r.Backends {
				if err := validateAddr(b.Addr, true); err != nil {
					return fmt.Errorf("route table: %s listen %q (app %q, service %q, container %q): backend %q: %w", proto, r.Listen, r.App, r.Service, b.Container, b.Addr, err)
				}
			}
		}
	}
	return nil
}

// maxRelayIdleMS (24 hours) and maxRelayConns bound a TCP or UDP route's
// idle_timeout_ms and max_conns.
const (
	maxRelayIdleMS = 24 * 3600 * 1000
	maxRelayConns  = 100000
)

// maxRouteTimeoutMS bounds the optional per-route timeouts (one hour).
const maxRouteTimeoutMS = 3600 * 1000

// validateHost accepts a lowercase DNS name of labels [a-z0-9-] (1–63
// characters, no leading or trailing hyphen, at most 253 characters), or
// "*." followed by such a name.
func validateHost(host string) error {
	name := strings.TrimPrefix(host, "*.")
	if name == "" || len(name) > 253 {
		return fmt.Errorf("empty or longer than 253 characters: %w", ErrInvalidTable)
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("label %q is empty or longer than 63 characters: %w", label, ErrInvalidTable)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-': %w", label, ErrInvalidTable)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return fmt.Errorf("label %q has character %q (only letters, digits, '-' and a leading \"*.\"): %w", label, c, ErrInvalidTable)
			}
		}
	}
	return nil
}

// validateAddr accepts "IP:port" with port 1..65535; the IP may be empty
// (all interfaces) only when needIP is false.
func validateAddr(addr string, needIP bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTable, err)
	}
	if host != "" || needIP {
		ip, err := netip.ParseAddr(host)
		if err != nil || ip.Zone() != "" {
			return fmt.Errorf("%q is not an IP address: %w", host, ErrInvalidTable)
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return fmt.Errorf("port %q is not in 1..65535: %w", port, ErrInvalidTable)
	}
	return nil
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
