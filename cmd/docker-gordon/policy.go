package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/pelletier/go-toml/v2"
)

// bindPolicy looks up an operator-approved host path for a bind name in
// <state>/config.toml:
//
//	[binds]
//	config = "/srv/blog/config"
//
// A bind name that is not approved is refused with what to add.
func bindPolicy(stateDir, name string) (string, error) {
	path := filepath.Join(stateDir, "config.toml")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("bind %q is not approved: add [binds] %s = \"/host/path\" to %s", name, name, path)
	}
	if err != nil {
		return "", err
	}
	var cfg struct {
		Binds map[string]string `toml:"binds"`
	}
	if err := toml.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	p, ok := cfg.Binds[name]
	if !ok || p == "" {
		return "", fmt.Errorf("bind %q is not approved: add %s = \"/host/path\" under [binds] in %s", name, name, path)
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s: binds.%s = %q: want an absolute host path", path, name, p)
	}
	return p, nil
}

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
