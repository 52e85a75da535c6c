package system

// The swarm edge's published ports: a Swarm host-mode port is
// part of the service spec, so system start declares them all — HTTP,
// HTTPS (with the ACME settings) and the TCP ports the apps' TCP binds
// use — and a deploy whose bind the edge does not publish is refused
// before anything changes.

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// swarmPort is the host-mode port of an edge listen address (--http-addr,
// --https-addr): the edge publishes it on every node's addresses, so only
// ":PORT" (or a wildcard host) is meaningful.
func swarmPort(flag, addr string) (int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
		if n, perr := strconv.Atoi(port); perr == nil && n > 0 && n < 65536 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s %q: on a swarm the edge publishes a port on every edge node (host mode), so give :PORT: %w", flag, addr, core.ErrInvalid)
}

// resolveSwarmEdge sets cfg's HTTPS port, ACME settings and TCP ports from
// system start's flags: a flag given now wins, else the last start's
// (old, from swarm.json). caRoot is --acme-ca-root's content when given
// now (cfg.ACME.CARootConfig is then its config's name). Nothing changes
// here: an invalid flag is refused before the swarm is touched.
func resolveSwarmEdge(changed func(flag string) bool, cfg *swarm.Config, old swarm.Config, tls TLSOptions, tcpList string) (caRoot []byte, err error) {
	cfg.HTTPSPort, cfg.ACME = old.HTTPSPort, old.ACME
	if changed("https-addr") {
		cfg.HTTPSPort = 0
		if tls.HTTPSAddr != "" {
			if cfg.HTTPSPort, err = swarmPort("--https-addr", tls.HTTPSAddr); err != nil {
				return nil, err
			}
		}
	}
	if cfg.HTTPSPort == cfg.HTTPPort || (cfg.HTTPSPort > 0 && cfg.HTTPSPort == cfg.AdminPort) {
		return nil, fmt.Errorf("--https-addr :%d: the edge's HTTP or admin port already: pick another port: %w", cfg.HTTPSPort, core.ErrInvalid)
	}
	acmeGiven := false
	for _, f := range []struct {
		name string
		dst  *string
		v    string
	}{{"acme-email", &cfg.ACME.Email, tls.ACMEEmail}, {"acme-ca", &cfg.ACME.CA, tls.ACMECA}} {
		if changed(f.name) {
			*f.dst, acmeGiven = f.v, true
		}
	}
	if changed("acme-ca-root") {
		acmeGiven, cfg.ACME.CARootConfig = true, ""
		if tls.ACMECARoot != "" {
			if caRoot, err = ReadCertFile("acme-ca-root", tls.ACMECARoot); err != nil {
				return nil, err
			}
			cfg.ACME.CARootConfig = swarm.CARootConfigName(caRoot)
		}
	}
	switch {
	case changed("no-acme"):
		cfg.ACME.Off = tls.NoACME
	case acmeGiven:
		cfg.ACME.Off = false // an --acme-* flag means ACME
	}
	list := swarm.FormatPorts(old.TCPPorts)
	if changed("tcp-ports") {
		list = tcpList
	}
	if cfg.TCPPorts, err = swarm.ParseTCPPorts(list, cfg.HTTPPort, cfg.HTTPSPort, cfg.AdminPort); err != nil {
		return nil, err
	}
	return caRoot, nil
}

// ensureCARoot returns the ID of the CA root's Docker config when HTTPS
// with ACME trusts one: created from caRoot when given now, else the last
// start's, which must still exist.
func ensureCARoot(ctx context.Context, api client.APIClient, cfg swarm.Config, caRoot []byte) (string, error) {
	name := cfg.ACME.CARootConfig
	switch {
	case cfg.HTTPSPort == 0 || cfg.ACME.Off || name == "":
		return "", nil
	case caRoot != nil:
		return swarm.EnsureConfig(ctx, api, name, caRoot)
	}
	id, err := swarm.ConfigID(ctx, api, name)
	if err != nil {
		return "", fmt.Errorf("the last start's --acme-ca-root: %w: pass --acme-ca-root FILE again (or --acme-ca-root \"\" for none)", err)
	}
	return id, nil
}

// SwarmPortsText is "HTTP :80, HTTPS :443, TCP :9000 :9001".
func SwarmPortsText(c swarm.Config) string {
	s := fmt.Sprintf("HTTP :%d", c.HTTPPort)
	if c.HTTPSPort > 0 {
		s += fmt.Sprintf(", HTTPS :%d", c.HTTPSPort)
	}
	if len(c.TCPPorts) > 0 {
		s += ", TCP"
		for _, p := range c.TCPPorts {
			s += fmt.Sprintf(" :%d", p)
		}
	}
	return s
}

// printEdgeServiceAction says what system start did to the edge service
// and, for an update, that Swarm replaces each node's edge task once.
func printEdgeServiceAction(w io.Writer, cfg, old swarm.Config, wasSwarm bool, action string) {
	fmt.Fprintf(w, "%s: global service %s (%s on every edge node, host mode)\n", cfg.Service, action, SwarmPortsText(cfg))
	if action != "updated" {
		return
	}
	if wasSwarm && (old.HTTPPort != cfg.HTTPPort || old.HTTPSPort != cfg.HTTPSPort || !slices.Equal(old.TCPPorts, cfg.TCPPorts)) {
		fmt.Fprintf(w, "%s: published ports changed from %s\n", cfg.Service, SwarmPortsText(old))
	}
	fmt.Fprintf(w, "%s: Swarm replaces the edge task of each node once (stop, then start: that node's edge does not answer for a moment)\n", cfg.Service)
}

// refuseUnpublishingBoundPorts refuses (core.ErrConflict, before anything
// changes) a --tcp-ports list without a port a serving app's TCP bind
// publishes: its bind would stop answering from outside.
func refuseUnpublishingBoundPorts(ctx context.Context, env Env, ports []int) error {
	store, err := env.Records()
	if err != nil {
		return err
	}
	apps, err := store.ListApps(ctx)
	if err != nil {
		return err
	}
	var bound []string
	for _, app := range apps {
		a, err := store.LoadActive(ctx, app)
		if err != nil {
			continue
		}
		for name, svc := range a.Services {
			if svc == nil {
				continue
			}
			for _, t := range svc.Spec.TCP {
				_, p, perr := net.SplitHostPort(t.Publish)
				n, aerr := strconv.Atoi(p)
				if t.Publish != "" && perr == nil && aerr == nil && !slices.Contains(ports, n) {
					bound = append(bound, fmt.Sprintf("app %s service %s binds TCP :%d", app, name, n))
				}
			}
		}
	}
	if len(bound) == 0 {
		return nil
	}
	slices.Sort(bound)
	return fmt.Errorf("--tcp-ports would stop publishing what serving apps bind (%s): keep those ports in the list, or deploy the apps without the bind first; nothing was changed: %w",
		strings.Join(bound, "; "), core.ErrConflict)
}
