package docker

import (
	"context"
	"fmt"
	"io"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// StreamLogs is Logs with a choice of streams: the container's stdout
// goes to out and its stderr to errw, and a nil writer leaves that stream
// out (the edge writes its access log on stdout and its own log on
// stderr). tail is "all" or a number of lines. Errors: the container is
// not there (core.ErrNotFound), or the engine failed.
func StreamLogs(ctx context.Context, api client.APIClient, name string, follow bool, tail string, out, errw io.Writer) error {
	cur, err := inspectUnit(ctx, api, name, "")
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("%s: no such system container: %w", name, core.ErrNotFound)
	}
	rc, err := api.ContainerLogs(ctx, cur.ID, client.ContainerLogsOptions{ShowStdout: out != nil, ShowStderr: errw != nil, Follow: follow, Tail: tail})
	if err != nil {
		return fmt.Errorf("%s: logs: %w", name, classify(err))
	}
	defer rc.Close()
	if out == nil {
		out = io.Discard
	}
	if errw == nil {
		errw = io.Discard
	}
	if _, err := stdcopy.StdCopy(out, errw, rc); err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s: logs: %w", name, err)
	}
	return nil
}
