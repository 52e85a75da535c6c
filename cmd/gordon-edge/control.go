package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/control"
	"github.com/gordon-deploy/docker-gordon/internal/durable"
	"github.com/gordon-deploy/docker-gordon/internal/subnetaddr"
)

// controlAddr resolves --admin-addr: a "CIDR:PORT" value (a swarm edge's
// control network) binds this container's own address inside CIDR, so
// the admin endpoints are not on the app networks the task also joins,
// and the peers' addresses are kept to that network (nil lookup: the
// default resolver, for any other value).
func controlAddr(ctx context.Context, addr string) (string, func(context.Context, string) ([]string, error), error) {
	subnet, _, ok := subnetaddr.Parse(addr)
	if !ok {
		return addr, nil, nil
	}
	bound, err := subnetaddr.Resolve(ctx, addr, 30*time.Second)
	if err != nil {
		return "", nil, err
	}
	lookup := func(ctx context.Context, name string) ([]string, error) {
		ips, err := net.DefaultResolver.LookupHost(ctx, name)
		return subnetaddr.Within(subnet, ips), err
	}
	return bound, lookup, nil
}

// loadControl reads --control-file (nil without one); updates the
// manager pushes later (PUT /control) are kept in <state>/edge/control.json
// so a restart of the process in the same task keeps them.
func loadControl(file, edgeDir string) (*control.Keyring, error) {
	if file == "" {
		return nil, nil
	}
	saved := filepath.Join(edgeDir, "control.json")
	k, err := control.Load(file, saved, func(b []byte) error { return durable.WriteFile(saved, b, 0o600) })
	if err != nil {
		return nil, fmt.Errorf("--control-file: %w", err)
	}
	return k, nil
}

// newCopySecretCommand is `gordon-edge copy-secret SRC DST`: a one-shot
// task of an adopting manager copies the control record (a Docker secret
// no long-running service holds) into its state directory, mode 0600.
func newCopySecretCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "copy-secret SRC DST",
		Short:  "Copy a Docker secret's file to DST (mode 0600): a swarm manager's adoption",
		Args:   cobra.ExactArgs(2),
		Hidden: true,
		RunE: func(_ *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			return durable.WriteFile(args[1], data, 0o600)
		},
	}
}
