package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

const maintenanceLong = `Maintenance mode makes the edge answer every HTTP host of an app
with 503 Service Unavailable, "Retry-After: 30" and "Cache-Control: no-store":
an HTML page with the message (HTML-escaped), or the JSON document
{"error":"maintenance","message":"..."} when the client's Accept prefers
application/json. Clients whose address is in --allow are proxied as usual,
e.g. to check the app (the address is the peer's, or behind the edge's
--trusted-proxies the right-most X-Forwarded-For entry that is not one).

The containers keep running and readiness, routing records and the serving
containers are untouched; deploy, rollback, restart, stop and start keep the mode. It is
a journaled operation (see "docker gordon ops APP") and lives in the app's
records and the published route table, so it survives edge restarts and
upgrades. TCP and UDP ports are not affected.`

func newMaintenanceCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "maintenance",
		Short: "Put an app's HTTP hosts in maintenance (503 with a message) or take them out",
		Long:  maintenanceLong,
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newMaintenanceOnCommand(env), newMaintenanceOffCommand(env), newMaintenanceStatusCommand(env))
	return cmd
}

func newMaintenanceOnCommand(env *cliEnv) *cobra.Command {
	var o lifecycleOptions
	var message string
	var allow []string
	cmd := &cobra.Command{
		Use:   "on APP [--message TEXT] [--allow CIDR]...",
		Short: "Answer the app's HTTP hosts with 503 and a message; containers keep running",
		Long: maintenanceLong + `

Running "on" again replaces the message and the allow list.

Exit status: 0 success, 1 failed.`,
		Example: `  docker gordon maintenance on blog --message "Back at 14:00 UTC" --allow 203.0.113.0/24`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMaintenance(cmd, env, engine.MaintenanceRequest{App: args[0], On: true, Message: message, Allow: allow, OpKey: o.opKey}, o.format)
		},
	}
	cmd.Flags().StringVar(&message, "message", "", "text shown to clients (plain text, at most 4096 bytes; default: a generic maintenance message)")
	cmd.Flags().StringArrayVar(&allow, "allow", nil, "CIDR or IP whose clients are proxied as usual (repeatable)")
	addLifecycleFlags(cmd, &o, false)
	return cmd
}

func newMaintenanceOffCommand(env *cliEnv) *cobra.Command {
	var o lifecycleOptions
	cmd := &cobra.Command{
		Use:   "off APP",
		Short: "End the app's maintenance mode: its HTTP hosts are served again",
		Long: `End maintenance mode: the record is cleared and the app's routes
are published without it. Nothing else changes. Running it on an app that is
not in maintenance journals an op that changes nothing.

Exit status: 0 success, 1 failed.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMaintenance(cmd, env, engine.MaintenanceRequest{App: args[0], OpKey: o.opKey}, o.format)
		},
	}
	addLifecycleFlags(cmd, &o, false)
	return cmd
}

func newMaintenanceStatusCommand(env *cliEnv) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status APP",
		Short: "Show whether the app is in maintenance, since when, its message and allow list",
		Long: `Show the app's maintenance record and the op that set it. With
--format json: {"app", "on", "message", "allow", "since", "op"} (message,
allow, since and op omitted when empty).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := env.openStore()
			if err != nil {
				return err
			}
			app := args[0]
			info, err := (&engine.Engine{Store: store}).MaintenanceStatus(cmd.Context(), app)
			if errors.Is(err, core.ErrNotFound) {
				return fmt.Errorf("app %q not found in %s (deploy it with: docker gordon deploy -f FILE)", app, env.opts.stateDir)
			}
			if err != nil {
				return err
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), info)
			}
			if !info.On {
				fmt.Fprintf(env.dockerCli.Out(), "app %s: maintenance off\n", app)
				return nil
			}
			line := maintenanceLine(&routetable.Maintenance{Message: info.Message, Allow: info.Allow})
			if info.Op != "" {
				line += fmt.Sprintf(" (since %s, op %s)", info.Since.UTC().Format("2006-01-02 15:04:05 UTC"), info.Op)
			}
			fmt.Fprintf(env.dockerCli.Out(), "app %s: %s\n", app, line)
			return nil
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

// runMaintenance runs one maintenance verb and prints its result.
func runMaintenance(cmd *cobra.Command, env *cliEnv, req engine.MaintenanceRequest, format string) error {
	ctx := cmd.Context()
	verb := "maintenance off"
	if req.On {
		verb = "maintenance on"
	}
	eng, err := env.engine(ctx, "maintenance")
	if err != nil {
		return err
	}
	res, verr := eng.Maintenance(ctx, req)
	if res == nil {
		return verr
	}
	if isJSON(format) {
		if err := writeJSON(env.dockerCli.Out(), res); err != nil {
			return err
		}
	} else {
		renderOpResult(env, verb, res)
	}
	return exitForOutcome(res.Outcome, verr)
}

// maintenanceLine is the one-line text of a maintenance record.
func maintenanceLine(m *routetable.Maintenance) string {
	var b strings.Builder
	b.WriteString("maintenance on")
	if m.Message != "" {
		b.WriteString(", message " + strconv.Quote(m.Message))
	}
	if len(m.Allow) > 0 {
		b.WriteString(", allow " + strings.Join(m.Allow, ","))
	}
	return b.String()
}
