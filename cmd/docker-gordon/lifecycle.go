package main

// The lifecycle runner shared by stop, start, restart and remove: their
// flags, one engine verb run with progress on stderr, and the result table.

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/cmd/internal/usererr"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// lifecycleOptions are the flags of stop, start, restart and remove.
type lifecycleOptions struct {
	services []string
	opKey    string
	format   string
	quiet    bool
}

// lifecycleVerb is one engine verb over a LifecycleRequest.
type lifecycleVerb func(*engine.Engine, context.Context, engine.LifecycleRequest) (*engine.OpResult, error)

func addLifecycleFlags(cmd *cobra.Command, o *lifecycleOptions, services bool) {
	f := cmd.Flags()
	if services {
		f.StringArrayVar(&o.services, "service", nil, "act only on this service (repeatable)")
	}
	f.StringVar(&o.opKey, "op-key", "", "idempotency key: a repeat with the same key returns the stored result")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress lines on stderr")
	addFormatFlag(cmd, &o.format)
}

// runLifecycle runs one lifecycle verb with progress on stderr and the
// result on stdout; the exit status follows the outcome (decision 5).
func runLifecycle(cmd *cobra.Command, env *cliEnv, verb string, fn lifecycleVerb, o lifecycleOptions, app string) error {
	ctx := cmd.Context()
	eng, err := env.engine(ctx, verb)
	if err != nil {
		return err
	}
	pr := newProgressRenderer(env.dockerCli.Err(), env.dockerCli.Err().IsTerminal())
	if !o.quiet {
		eng.Progress = pr.event
	}
	res, verr := fn(eng, ctx, engine.LifecycleRequest{App: app, Services: o.services, OpKey: o.opKey})
	pr.finish()
	if res == nil {
		return verr
	}
	if isJSON(o.format) {
		if err := writeJSON(env.dockerCli.Out(), res); err != nil {
			return err
		}
	} else {
		renderOpResult(env, verb, res)
	}
	return exitForOutcome(res.Outcome, verr)
}

// doneWords says what a succeeded step of a stop or remove did.
var doneWords = map[string]string{"stop": "stopped", "remove": string(engine.ResultRemoved), "sleep": "asleep", "wake": "awake"}

func renderOpResult(env *cliEnv, verb string, res *engine.OpResult) {
	w := env.dockerCli.Out()
	for _, s := range res.Services {
		for _, l := range s.Diagnostics {
			fmt.Fprintf(env.dockerCli.Err(), "%s | %s\n", s.Service, l)
		}
	}
	if len(res.Services) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "SERVICE\tRESULT\tBEFORE\tAFTER\tPORTS\tERROR")
		for _, s := range res.Services {
			result := string(s.Result)
			if done, ok := doneWords[verb]; ok && s.Result == engine.ResultDeployed {
				result = done // the journal's "deployed": the step succeeded
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Service, orDash(result), orDash(shortID(s.Before)), orDash(shortID(s.After)),
				formatBinds(s.IP, s.BackendBinds, s.UDPBackendBinds), orDash(s.Error))
		}
		tw.Flush()
	}
	for _, wa := range res.Warnings {
		fmt.Fprintln(env.dockerCli.Err(), usererr.WarningLine(wa))
	}
	if len(res.KeptVolumes) > 0 {
		fmt.Fprintf(env.dockerCli.Err(), "kept volumes (their data stays; a new app of this name does not see them): %s; delete with docker volume rm %s\n",
			strings.Join(res.KeptVolumes, ", "), strings.Join(res.KeptVolumes, " "))
	}
	replayed := ""
	if res.Replayed {
		replayed = " (replayed)"
	}
	fmt.Fprintf(w, "%s %s: op %s: %s%s\n", verb, res.Op.App, res.Op.ID, orDash(string(res.Outcome)), replayed)
}
