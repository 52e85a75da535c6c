package swarm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// The edge's HTTPS on a swarm: each edge task keeps its certificates in a
// certmagic storage that gordon-reconcile serves on the edge overlay, so
// every node serves the certificates any node obtained.
const (
	// CertStoragePort is where gordon-reconcile serves the certificate
	// storage on the overlay (reconcile --cert-storage-addr :9190).
	CertStoragePort = 9190
	// CertStorageURL is the edge tasks' --cert-storage: gordon-reconcile
	// (its container name on the control overlay) at CertStoragePort,
	// over TLS with the control CA pinned.
	CertStorageURL = "https://gordon-reconcile:9190"
	// CARootPath is where --acme-ca-root's Docker config is mounted in
	// every edge task.
	CARootPath = "/etc/gordon/acme-ca-root.pem"
	// caRootConfigPrefix names the CA root's Docker config; the name ends
	// with the first 12 hex digits of the content's sha256.
	caRootConfigPrefix = "gordon-edge-acme-ca-root-"
)

// CARootConfigName is the content-addressed Docker config name of a CA
// root PEM: a new content is a new config, the same content the same one.
func CARootConfigName(pem []byte) string {
	sum := sha256.Sum256(pem)
	return caRootConfigPrefix + hex.EncodeToString(sum[:])[:12]
}

// ParseTCPPorts parses system start --tcp-ports: comma-separated ports
// (spaces allowed, "" is none), each 1–65535, none twice and none equal
// to the edge's HTTP, HTTPS or admin port (the edge listens on those in
// every task). The result is sorted.
func ParseTCPPorts(list string, httpPort, httpsPort, adminPort int) ([]int, error) {
	taken := map[int]string{httpPort: "the HTTP port (--http-addr)", adminPort: "the edge's admin port"}
	if httpsPort > 0 {
		taken[httpsPort] = "the HTTPS port (--https-addr)"
	}
	seen := map[int]bool{}
	var out []int
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		switch {
		case err != nil || p < 1 || p > 65535:
			return nil, fmt.Errorf("--tcp-ports: %q is not a port (1-65535): %w", f, core.ErrInvalid)
		case taken[p] != "":
			return nil, fmt.Errorf("--tcp-ports: %d is %s: pick another port: %w", p, taken[p], core.ErrInvalid)
		case seen[p]:
			return nil, fmt.Errorf("--tcp-ports: %d is given twice: %w", p, core.ErrInvalid)
		}
		seen[p] = true
		out = append(out, p)
	}
	sort.Ints(out)
	return out, nil
}

// FormatPorts is "9000,9001" ("" for none).
func FormatPorts(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// CheckBinds refuses what spec asks of the edge that this swarm's edge
// service does not publish: a TCP bind on a port not in TCPPorts, a TCP
// bind on a specific address (a host-mode port is published on all of a
// node's addresses), and any UDP bind (the swarm edge publishes no UDP
// port). The error wraps core.ErrInvalid and says what to run.
func (c Config) CheckBinds(spec core.AppSpec) error {
	published := map[int]bool{}
	for _, p := range c.TCPPorts {
		published[p] = true
	}
	var problems []string
	var missing []int
	for _, s := range spec.Services {
		n := s.Name
		for _, b := range s.TCP {
			host, port, _ := net.SplitHostPort(b.Publish)
			p, _ := strconv.Atoi(port)
			if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
				problems = append(problems, fmt.Sprintf("service %s: tcp publish %q: on a swarm the edge publishes a port on all of each edge node's addresses: give \"0.0.0.0:%d\"", n, b.Publish, p))
				continue
			}
			if !published[p] {
				problems = append(problems, fmt.Sprintf("service %s: tcp publish %q: the swarm edge does not publish port %d", n, b.Publish, p))
				missing = append(missing, p)
			}
		}
		for _, b := range s.UDP {
			problems = append(problems, fmt.Sprintf("service %s: udp publish %q: the swarm edge publishes no UDP port (not built yet)", n, b.Publish))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	msg := strings.Join(problems, "; ")
	if len(missing) > 0 {
		all := append(append([]int{}, c.TCPPorts...), missing...)
		sort.Ints(all)
		all = dedupe(all)
		msg += fmt.Sprintf(" (it publishes %s): publish it with `docker gordon system start --tcp-ports %s` (each node's edge task is replaced once), then deploy again",
			orNone(FormatPorts(c.TCPPorts)), FormatPorts(all))
	}
	return fmt.Errorf("%s: %w", msg, core.ErrInvalid)
}

func dedupe(sorted []int) []int {
	out := sorted[:0]
	for i, p := range sorted {
		if i == 0 || p != sorted[i-1] {
			out = append(out, p)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "no TCP port"
	}
	return "TCP " + s
}
