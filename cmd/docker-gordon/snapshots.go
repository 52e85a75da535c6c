package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// The snapshots verbs (docs/data.md): thin wrappers over the engine's
// SnapshotCreate and SnapshotRestore and the snapshot store.

func newSnapshotsCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshots",
		Short: "List, take, restore, export, import and remove volume snapshots",
		Long: `Volume snapshots are zstd-compressed copies of a service's volumes, stored
under the state directory (snapshots/APP/ID). A deploy, rollback or restart
that replaces a service with volumes takes one after the old generation
stopped and before the new one starts ([services.X.snapshots]). See
docs/data.md.`,
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newSnapshotsLsCommand(env), newSnapshotsCreateCommand(env), newSnapshotsRestoreCommand(env),
		newSnapshotsExportCommand(env), newSnapshotsImportCommand(env), newSnapshotsRmCommand(env))
	return cmd
}

func (e *cliEnv) snapshotStore() *snapshot.Store { return snapshot.Open(e.opts.stateDir) }

func newSnapshotsLsCommand(env *cliEnv) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "ls APP",
		Short: "List an app's snapshots, oldest first",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := env.snapshotStore().List(args[0])
			if err != nil {
				return err
			}
			if isJSON(format) {
				if list == nil {
					list = []snapshot.Manifest{}
				}
				return writeJSON(env.dockerCli.Out(), list)
			}
			tw := newTable(env.dockerCli.Out())
			fmt.Fprintln(tw, "ID\tSERVICE\tTRIGGER\tKIND\tOP\tREVISION\tCREATED\tSIZE\tSTORED")
			for _, m := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Service, m.Trigger, m.Kind(), orDash(m.Op), orDash(m.Revision),
					m.CreatedAt.UTC().Format(time.RFC3339), snapshot.ByteSize(m.Size()), snapshot.ByteSize(m.Stored()))
			}
			return tw.Flush()
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

func newSnapshotsCreateCommand(env *cliEnv) *cobra.Command {
	var o lifecycleOptions
	cmd := &cobra.Command{
		Use:   "create APP [--service S]",
		Short: "Snapshot the volumes of an app's services (held while each stops, is copied and starts again); a service with only a backup command is dumped online",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var taken []snapshot.Manifest
			err := runLifecycle(cmd, env, "snapshots create", func(eng *engine.Engine, ctx context.Context, req engine.LifecycleRequest) (*engine.OpResult, error) {
				res, t, err := eng.SnapshotCreate(ctx, req)
				taken = t
				return res, err
			}, o, args[0])
			if !isJSON(o.format) {
				for _, m := range taken {
					fmt.Fprintf(env.dockerCli.Out(), "snapshot %s: service %s, %s\n", m.ID, m.Service, snapshot.ByteSize(m.Size()))
				}
			}
			return err
		},
	}
	addLifecycleFlags(cmd, &o, true)
	return cmd
}

func newSnapshotsRestoreCommand(env *cliEnv) *cobra.Command {
	var o lifecycleOptions
	cmd := &cobra.Command{
		Use:   "restore APP ID",
		Short: "Restore a snapshot into its service's volumes (held while it stops, is restored and starts again)",
		Long: `Restore snapshot ID into the volumes of its service: the service is held at
the edge, stopped, its volumes snapshotted (so the restore can be undone),
replaced by the snapshot's content, and started again in place.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLifecycle(cmd, env, "snapshots restore", func(eng *engine.Engine, ctx context.Context, req engine.LifecycleRequest) (*engine.OpResult, error) {
				return eng.SnapshotRestore(ctx, req.App, args[1], req.OpKey)
			}, o, args[0])
		},
	}
	addLifecycleFlags(cmd, &o, false)
	return cmd
}

func newSnapshotsExportCommand(env *cliEnv) *cobra.Command {
	var dump bool
	cmd := &cobra.Command{
		Use:   "export APP ID [--dump] > FILE",
		Short: "Write a snapshot to standard output as one file (manifest and compressed volumes), or an online dump's output itself",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if env.dockerCli.Out().IsTerminal() {
				return fmt.Errorf("snapshots export: standard output is a terminal; redirect it to a file: docker gordon snapshots export %s %s%s > FILE", args[0], args[1], map[bool]string{true: " --dump"}[dump])
			}
			if dump {
				return env.snapshotStore().WriteDump(args[0], args[1], env.dockerCli.Out())
			}
			return env.snapshotStore().Export(args[0], args[1], env.dockerCli.Out())
		},
	}
	cmd.Flags().BoolVar(&dump, "dump", false, "write an online dump's output as the command wrote it (for the database's own restore tool)")
	return cmd
}

func newSnapshotsImportCommand(env *cliEnv) *cobra.Command {
	return &cobra.Command{
		Use:   "import APP FILE",
		Short: "Store a file `snapshots export` wrote as a snapshot of APP (its digests checked)",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[1])
			if err != nil {
				return fmt.Errorf("snapshots import: %w", err)
			}
			defer f.Close()
			m, err := env.snapshotStore().Import(args[0], f)
			if err != nil {
				return err
			}
			next := "restore it with `docker gordon snapshots restore"
			if m.IsDump() {
				next = "write the dump out with `docker gordon snapshots export --dump"
			}
			fmt.Fprintf(env.dockerCli.Out(), "snapshot %s: service %s, %s; %s %s %s`\n", m.ID, m.Service, snapshot.ByteSize(m.Size()), next, args[0], m.ID)
			return nil
		},
	}
}

func newSnapshotsRmCommand(env *cliEnv) *cobra.Command {
	return &cobra.Command{
		Use:   "rm APP ID...",
		Short: "Remove snapshots",
		Args:  usageArgs(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range args[1:] {
				if err := env.snapshotStore().Remove(args[0], id); err != nil {
					return err
				}
				fmt.Fprintf(env.dockerCli.Out(), "removed snapshot %s\n", id)
			}
			return nil
		},
	}
}
