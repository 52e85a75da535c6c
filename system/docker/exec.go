package docker

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/docker/cli/cli/streams"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
)

// ExecOptions are `docker gordon exec`'s settings, as docker exec's: stdin
// without a terminal (Interactive), no terminal even when stdin is one
// (NoTTY), the user, working directory and extra environment (KEY=VALUE).
type ExecOptions struct {
	Interactive, NoTTY bool
	User, Workdir      string
	Env                []string
}

// Exec runs argv in the running container id (what names it in errors):
// with a TTY (and stdin) when in is a terminal and o.NoTTY is not set,
// with stdin alone when o.Interactive. It returns the command's exit
// code. A container that is not running is an error saying how to bring
// it back.
func Exec(ctx context.Context, api client.APIClient, in *streams.In, out *streams.Out, errw io.Writer, id string, argv []string, o ExecOptions, what string) (int, error) {
	insp, err := api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("exec %s: container %s: %w", what, shortID(id), dockererr.Classify(err))
	}
	if insp.Container.State == nil || !insp.Container.State.Running {
		return 0, fmt.Errorf("exec %s: container %s is not running (see docker gordon status; the reconcile pass or docker gordon start brings it back)", what, shortID(id))
	}
	tty := !o.NoTTY && in.IsTerminal()
	withStdin := tty || o.Interactive
	opts := client.ExecCreateOptions{Cmd: argv, TTY: tty, AttachStdin: withStdin, AttachStdout: true, AttachStderr: true,
		User: o.User, WorkingDir: o.Workdir, Env: o.Env}
	if tty {
		h, w := out.GetTtySize()
		opts.ConsoleSize = client.ConsoleSize{Height: h, Width: w}
	}
	created, err := api.ExecCreate(ctx, id, opts)
	if err != nil {
		return 0, fmt.Errorf("exec %s: %w", what, dockererr.Classify(err))
	}
	att, err := api.ExecAttach(ctx, created.ID, client.ExecAttachOptions{TTY: tty, ConsoleSize: opts.ConsoleSize})
	if err != nil {
		return 0, fmt.Errorf("exec %s: attach: %w", what, dockererr.Classify(err))
	}
	defer att.Close()
	if tty {
		if err := in.SetRawTerminal(); err == nil {
			defer in.RestoreTerminal()
		}
	}
	if withStdin {
		go func() {
			_, _ = io.Copy(att.Conn, in)
			_ = att.CloseWrite()
		}()
	}
	if tty {
		_, err = io.Copy(out, att.Reader)
	} else {
		_, err = stdcopy.StdCopy(out, errw, att.Reader)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("exec %s: stream: %w", what, err)
	}
	res, err := api.ExecInspect(context.WithoutCancel(ctx), created.ID, client.ExecInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("exec %s: exit status: %w", what, dockererr.Classify(err))
	}
	return res.ExitCode, nil
}
