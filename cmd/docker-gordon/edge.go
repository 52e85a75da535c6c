package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func newEdgeCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "edge", Short: "The edge proxy (gordon-edge) that routes public traffic to serving generations"}

	var httpAddr, adminAddr string
	run := &cobra.Command{
		Use:   "run",
		Short: "Run gordon-edge in the foreground for this state directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := findEdgeBinary()
			if err != nil {
				return err
			}
			args := []string{bin, "run", "--state-dir", env.opts.stateDir, "--http-addr", httpAddr}
			if adminAddr != "" {
				args = append(args, "--admin-addr", adminAddr)
			}
			env.close()
			// Replace this process: signals reach gordon-edge directly.
			return syscall.Exec(bin, args, os.Environ())
		},
	}
	run.Flags().StringVar(&httpAddr, "http-addr", ":80", "HTTP listen address")
	run.Flags().StringVar(&adminAddr, "admin-addr", "", "admin (metrics, status) address; default loopback")

	var format string
	status := &cobra.Command{
		Use:   "status",
		Short: "Show what the edge applied: generation, listeners, per-backend in-flight counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, err := env.pluginHost()
			if err != nil {
				return err
			}
			tr, err := host.Traffic(cmd.Context(), "edge")
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			st, err := tr.Status(ctx)
			if err != nil {
				return fmt.Errorf("edge status: %w (is gordon-edge running? docker gordon edge run)", err)
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), st)
			}
			w := env.dockerCli.Out()
			fmt.Fprintf(w, "applied generation: %d\n", st.AppliedGeneration)
			if st.Error != "" {
				fmt.Fprintf(w, "last error: %s\n", st.Error)
			}
			tw := newTable(w)
			fmt.Fprintln(tw, "BACKEND\tIN-FLIGHT")
			for _, b := range st.Backends {
				fmt.Fprintf(tw, "%s\t%d\n", b.Addr, b.InFlight)
			}
			return tw.Flush()
		},
	}
	addFormatFlag(status, &format)
	cmd.AddCommand(run, status)
	return cmd
}

// findEdgeBinary looks for gordon-edge on PATH, then next to this binary.
func findEdgeBinary() (string, error) {
	if p, err := exec.LookPath("gordon-edge"); err == nil {
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "gordon-edge")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("gordon-edge not found on PATH: run ./install.sh")
}
