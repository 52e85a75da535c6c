package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

type scaleOptions struct {
	pull   string
	opKey  string
	format string
}

func newScaleCommand(env *cliEnv) *cobra.Command {
	var o scaleOptions
	cmd := &cobra.Command{
		Use:   "scale APP SERVICE=N [SERVICE=N...]",
		Short: "Run N instances of a service, without dropping a request",
		Long: `Change how many instances services run. The serving revision is stored
again with the new counts (images pinned to the digests it runs) and
deployed as a scale of the serving generation: its instances keep serving;
scaling up creates and probes the new instances in parallel, then adds them
to the route set; scaling down withdraws the last instances from the routes,
drains them and stops each with the service's stop signal and grace. Other
services stay unchanged. A service with a volume, bind, device or UDP
interface runs one instance.

Exit status: 0 success, 2 partial, 1 failed.`,
		Args: usageArgs(func(cmd *cobra.Command, args []string) error {
			if err := cobra.MinimumNArgs(2)(cmd, args); err != nil {
				return err
			}
			_, err := parseScaleArgs(args[1:])
			return err
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			counts, err := parseScaleArgs(args[1:])
			if err != nil {
				return err
			}
			return runPinnedDeploy(cmd, env, "scale", o.pull, o.format, func(ctx context.Context, eng *engine.Engine) (*engine.DeployResult, error) {
				return eng.Scale(ctx, engine.ScaleRequest{App: args[0], Replicas: counts, OpKey: o.opKey, Pull: o.pull})
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.pull, "pull", "missing", "image pull policy: always, missing or never")
	f.StringVar(&o.opKey, "op-key", "", "idempotency key: a repeat with the same key returns the stored result")
	cmd.Flags().BoolVarP(&env.quiet, "quiet", "q", false, "no progress lines on stderr")
	addFormatFlag(cmd, &o.format)
	return cmd
}

// parseScaleArgs reads SERVICE=N arguments into service → N.
func parseScaleArgs(args []string) (map[string]int, error) {
	out := map[string]int{}
	for _, a := range args {
		name, num, ok := strings.Cut(a, "=")
		n, err := strconv.Atoi(num)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("%q: want SERVICE=N, e.g. web=3", a)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("service %s given twice", name)
		}
		out[name] = n
	}
	return out, nil
}
