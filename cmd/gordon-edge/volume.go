package main

import (
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/internal/volxfer"
)

// newVolumeHelperCommand is `gordon-edge volume-helper`: the one-shot
// task the swarm runtime starts on the node that holds a volume, to send
// the volume's tar to the manager or to restore one from it, over TLS on
// the control network (internal/volxfer; its environment says where and
// how). It exits 0 once both ends finished the transfer.
func newVolumeHelperCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "volume-helper",
		Short:  "Send a volume's tar to the swarm manager, or restore one from it (a one-shot task)",
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := volxfer.ConfigFromEnv()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return volxfer.Run(ctx, c)
		},
	}
}
