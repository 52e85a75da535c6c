// Command gordon-edge is the edge proxy of docker gordon (ARCHITECTURE §1,
// §5): `gordon-edge run --state-dir DIR --http-addr ADDR [--admin-addr
// ADDR]` serves in the foreground until SIGTERM or SIGINT, then shuts down
// gracefully; `gordon-edge version` prints the version.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// version is stamped by the Makefile (-X main.version=…).
var version = "dev"

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gordon-edge:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "gordon-edge",
		Short:         "Edge proxy of docker gordon: HTTP by Host, TCP by port",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCommand(), newVersionCommand())
	return root
}

type runOptions struct {
	stateDir        string
	httpAddr        string
	adminAddr       string
	logLevel        string
	shutdownTimeout time.Duration
}

func newRunCommand() *cobra.Command {
	var opts runOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Serve in the foreground until SIGTERM/SIGINT",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEdge(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.stateDir, "state-dir", defaultStateDir(), "gordon state directory (env GORDON_STATE_DIR)")
	f.StringVar(&opts.httpAddr, "http-addr", "", "public HTTP listen address, e.g. :80 (required)")
	f.StringVar(&opts.adminAddr, "admin-addr", "127.0.0.1:0", "loopback admin address (GET /status, /healthz)")
	f.StringVar(&opts.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	f.DurationVar(&opts.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long in-flight requests may finish on shutdown")
	_ = cmd.MarkFlagRequired("http-addr")
	return cmd
}

func runEdge(ctx context.Context, opts runOptions) error {
	if opts.stateDir == "" {
		return fmt.Errorf("--state-dir is required (no GORDON_STATE_DIR and no home directory)")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := hclog.New(&hclog.LoggerOptions{
		Name:   "gordon-edge",
		Level:  hclog.LevelFromString(opts.logLevel),
		Output: os.Stderr,
	})
	srv := edgeproxy.New(edgeproxy.Config{
		StateDir:        opts.stateDir,
		HTTPAddr:        opts.httpAddr,
		AdminAddr:       opts.adminAddr,
		Logger:          logger,
		ShutdownTimeout: opts.shutdownTimeout,
	})
	return srv.Run(ctx)
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "gordon-edge", version)
		},
	}
}

// defaultStateDir follows ARCHITECTURE §3: GORDON_STATE_DIR, else
// /var/lib/docker-gordon for root, else $XDG_STATE_HOME/docker-gordon
// (default ~/.local/state/docker-gordon).
func defaultStateDir() string {
	if d := os.Getenv("GORDON_STATE_DIR"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/lib/docker-gordon"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "docker-gordon")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "docker-gordon")
	}
	return ""
}
