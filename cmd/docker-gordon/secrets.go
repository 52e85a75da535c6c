package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// maxSecretSize bounds a secret read from stdin.
const maxSecretSize = 1 << 20

func newSecretsCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Manage app secrets (stored 0600 in the state directory, never printed)",
		Long: `Secrets live in the state directory, per app and service
(secrets/<app-id>/<service>/<name>, files 0600; a removed and redeployed
app gets a new id). A manifest refers to
them by name ([services.S.secrets]); a deploy injects the current value.
Changing a secret takes effect on the next deploy of the service.`,
	}
	cmd.AddCommand(newSecretsSetCommand(env), newSecretsLsCommand(env), newSecretsRmCommand(env))
	return cmd
}

func newSecretsSetCommand(env *cliEnv) *cobra.Command {
	return &cobra.Command{
		Use:   "set APP [SERVICE] NAME",
		Short: "Set a secret from standard input (one trailing newline is stripped); without SERVICE it is app-wide",
		Example: `  printf %s "$DB_PASSWORD" | docker gordon secrets set blog db db-password
  docker gordon secrets set blog web api-key < api-key.txt
  printf %s "$PG_PASSWORD" | docker gordon secrets set blog pg-password   # every service of blog`,
		Args: usageArgs(cobra.RangeArgs(2, 3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				// App-wide: every service that refers to NAME and has no
				// secret of its own by that name gets this value.
				args = []string{args[0], core.AppWideSecrets, args[1]}
			}
			in := env.dockerCli.In()
			if in.IsTerminal() {
				fmt.Fprintf(env.dockerCli.Err(), "reading the value of %s from standard input (end with Ctrl-D)\n", args[2])
			}
			value, err := readSecret(in)
			if err != nil {
				return fmt.Errorf("secrets set %s %s %s: %w", args[0], args[1], args[2], err)
			}
			return withSecretsLock(cmd.Context(), env, args[0], func(s core.Store) error {
				if err := s.SetSecret(cmd.Context(), args[0], args[1], args[2], value); err != nil {
					return err
				}
				scope := args[0] + "/" + args[1]
				if args[1] == core.AppWideSecrets {
					scope = args[0] + " (app-wide)"
				}
				fmt.Fprintf(env.dockerCli.Out(), "secret %s set for %s (%d bytes)\n", args[2], scope, len(value))
				return nil
			})
		},
	}
}

// readSecret reads stdin up to maxSecretSize and strips one trailing
// newline ("\n" or "\r\n"). An empty value is refused.
func readSecret(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSecretSize+1))
	if err != nil {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	if len(b) > maxSecretSize {
		return nil, fmt.Errorf("%w: value longer than %d bytes", core.ErrInvalid, maxSecretSize)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty value on standard input", core.ErrInvalid)
	}
	return b, nil
}

func newSecretsRmCommand(env *cliEnv) *cobra.Command {
	return &cobra.Command{
		Use:     "rm APP [SERVICE] NAME",
		Aliases: []string{"remove"},
		Short:   "Remove a secret (without SERVICE: the app-wide one; a deploy that still needs it fails its preflight)",
		Args:    usageArgs(cobra.RangeArgs(2, 3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				args = []string{args[0], core.AppWideSecrets, args[1]}
			}
			return withSecretsLock(cmd.Context(), env, args[0], func(s core.Store) error {
				if err := s.RemoveSecret(cmd.Context(), args[0], args[1], args[2]); err != nil {
					return err
				}
				fmt.Fprintf(env.dockerCli.Out(), "secret %s removed from %s/%s\n", args[2], args[0], args[1])
				return nil
			})
		},
	}
}

// withSecretsLock runs fn holding the app lock (engine.WithAppLock),
// bounded by --lock-timeout.
func withSecretsLock(ctx context.Context, env *cliEnv, app string, fn func(core.Store) error) error {
	store, err := env.openStore()
	if err != nil {
		return err
	}
	holder := core.LockHolder{PID: os.Getpid(), Verb: "secrets", StartedAt: time.Now().UTC(), Host: hostname()}
	return engine.WithAppLock(ctx, store, app, holder, env.opts.lockTimeout, env.dockerCli.Err(), func() error { return fn(store) })
}

type secretsLsOptions struct{ format string }

// secretEntry is one row of `secrets ls` (names only, never values).
type secretEntry struct {
	// Service is the service the secret belongs to; "" with AppWide.
	Service string `json:"service"`
	// AppWide is true for an app-wide secret (`secrets set APP NAME`).
	AppWide bool   `json:"app_wide,omitempty"`
	Name    string `json:"name"`
	// Referenced is true when the latest revision's manifest uses it.
	Referenced bool `json:"referenced"`
}

func newSecretsLsCommand(env *cliEnv) *cobra.Command {
	var o secretsLsOptions
	cmd := &cobra.Command{
		Use:     "ls APP [SERVICE]",
		Aliases: []string{"list"},
		Short:   "List secret names (never values) of an app's services",
		Args:    usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			store, err := env.openStore()
			if err != nil {
				return err
			}
			app := args[0]
			refs := map[string]map[string]bool{} // service → referenced names
			services := map[string]bool{}
			if id, err := store.LoadDesired(ctx, app); err == nil {
				if rev, err := store.LoadRevision(ctx, app, id); err == nil {
					for _, s := range rev.Spec.Services {
						services[s.Name] = true
						refs[s.Name] = map[string]bool{}
						for _, r := range s.Secrets {
							refs[s.Name][r.Name] = true
						}
					}
				}
			}
			if a, err := store.LoadActive(ctx, app); err == nil {
				for name := range a.Services {
					services[name] = true
				}
			} else if !errors.Is(err, core.ErrNotFound) {
				return err
			}
			if len(args) == 2 {
				services = map[string]bool{args[1]: true}
			}
			names := make([]string, 0, len(services))
			for s := range services {
				names = append(names, s)
			}
			sort.Strings(names)
			out := []secretEntry{}
			if len(args) == 1 {
				// App-wide secrets first: every service may refer to them.
				list, err := store.ListSecrets(ctx, app, core.AppWideSecrets)
				if err != nil {
					return err
				}
				for _, n := range list {
					used := false
					for _, r := range refs {
						used = used || r[n]
					}
					out = append(out, secretEntry{AppWide: true, Name: n, Referenced: used})
				}
			}
			for _, svc := range names {
				list, err := store.ListSecrets(ctx, app, svc)
				if err != nil {
					return err
				}
				for _, n := range list {
					out = append(out, secretEntry{Service: svc, Name: n, Referenced: refs[svc][n]})
				}
			}
			if isJSON(o.format) {
				return writeJSON(env.dockerCli.Out(), out)
			}
			if len(out) == 0 {
				fmt.Fprintf(env.dockerCli.Out(), "no secrets for %s\n", app)
				return nil
			}
			tw := newTable(env.dockerCli.Out())
			fmt.Fprintln(tw, "SERVICE\tNAME\tREFERENCED")
			for _, e := range out {
				svc := e.Service
				if e.AppWide {
					svc = "(app-wide)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%t\n", svc, e.Name, e.Referenced)
			}
			return tw.Flush()
		},
	}
	addFormatFlag(cmd, &o.format)
	return cmd
}
