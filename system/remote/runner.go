package remote

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/renameio/v2/maybe"
	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
	"github.com/gordon-deploy/docker-gordon/system/docker"
	"github.com/gordon-deploy/docker-gordon/system/image"
)

// Streams are where a runner's output and this side's progress go.
type Streams struct {
	Out    io.Writer // the runner's stdout
	Err    io.Writer // the runner's stderr and progress lines
	Logger hclog.Logger
}

// RunnerImage builds (or finds, cached by content) the runner image on the
// engine: this binary as /docker-gordon and gordon-edge beside it when it is
// installed (edge start and system start build the edge's image there):
// edgeBinary is its path, "" when it is not installed.
func RunnerImage(ctx context.Context, api client.APIClient, edgeBinary string) (image.Image, error) {
	self, err := os.Executable()
	if err != nil {
		return image.Image{}, fmt.Errorf("find own executable: %w", err)
	}
	bins := map[string]string{"/docker-gordon": self}
	if edgeBinary != "" {
		bins["/gordon-edge"] = edgeBinary
	}
	// Hashing some 45 MB of binaries costs more than the rest of a
	// status: remember the tag per (path, size, mtime) of the binaries.
	key, cacheFile := runnerCacheKey(bins)
	if key != "" {
		if data, err := os.ReadFile(cacheFile); err == nil {
			var c runnerImageCache
			if json.Unmarshal(data, &c) == nil && c.Key == key && c.Ref != "" {
				if res, err := api.ImageInspect(ctx, c.Ref); err == nil {
					return image.Image{ID: res.ID, Ref: c.Ref}, nil
				}
			}
		}
	}
	img, err := image.Build(ctx, api, "runner", bins, map[string]string{docker.LabelManaged: "true", docker.LabelRole: RoleRunner})
	if err == nil && key != "" {
		if data, merr := json.Marshal(runnerImageCache{Key: key, Ref: img.Ref}); merr == nil && os.MkdirAll(filepath.Dir(cacheFile), 0o700) == nil {
			_ = maybe.WriteFile(cacheFile, data, 0o644)
		}
	}
	return img, err
}

// PruneRunnerImages removes the runner images of other versions (best
// effort: the engine refuses to remove one a runner still uses).
func PruneRunnerImages(ctx context.Context, api client.APIClient, keep string) {
	res, err := api.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", image.Repo+"runner")})
	if err != nil {
		return
	}
	for _, im := range res.Items {
		if im.ID != keep {
			_, _ = api.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{PruneChildren: true})
		}
	}
}

// runnerImageCache remembers the runner image's tag for one set of binaries.
type runnerImageCache struct {
	Key string `json:"key"`
	Ref string `json:"ref"`
}

// runnerCacheKey names the binaries by path, size and modification time;
// "" when the user cache directory is unknown.
func runnerCacheKey(bins map[string]string) (key, file string) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", ""
	}
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(bins)) {
		fi, err := os.Stat(bins[p])
		if err != nil {
			return "", ""
		}
		fmt.Fprintf(&b, "%s=%s:%d:%d;", p, bins[p], fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String(), filepath.Join(dir, "docker-gordon", "runner-image.json")
}

// Run creates the runner container, attaches to it, starts it, sends
// the bundle and streams its output until it exits; it returns the exit
// status. Ctrl-C (ctx done) closes the runner's stdin and signals it
// SIGTERM: the remote verb stops as a local one does, and its output and
// exit status still arrive here.
func Run(ctx context.Context, s Streams, api client.APIClient, t Target, image string, p ServerPaths, args []string, b Bundle) (int, error) {
	bg := context.WithoutCancel(ctx)
	id, err := createRunner(ctx, api, t, image, p, args)
	if err != nil {
		return 0, err
	}
	s.Logger.Debug("runner created", "id", shortID(id))
	removeRunner := func() {
		_, _ = api.ContainerRemove(bg, id, client.ContainerRemoveOptions{Force: true})
	}
	att, err := api.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		removeRunner()
		return 0, fmt.Errorf("attach to the runner container: %w", dockererr.Classify(err))
	}
	defer att.Close()
	wait := api.ContainerWait(bg, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		removeRunner()
		return 0, fmt.Errorf("start the runner container: %w", dockererr.Classify(err))
	}
	s.Logger.Debug("runner started")
	if err := WriteBundle(att.Conn, b); err != nil {
		removeRunner()
		return 0, fmt.Errorf("send the verb's input to the runner: %w", err)
	}
	stopHeartbeat := startHeartbeat(att.Conn)
	defer stopHeartbeat()
	outDone := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(s.Out, s.Err, att.Reader)
		outDone <- err
	}()
	return awaitRunner(ctx, s, api, id, att, wait, outDone, stopHeartbeat)
}

// createRunner creates the runner container (not started): this binary
// running args on the host network, the engine's socket and the server's
// state directory mounted at their own paths, stdin open for the bundle;
// removed by the engine once it exits.
func createRunner(ctx context.Context, api client.APIClient, t Target, image string, p ServerPaths, args []string) (string, error) {
	env := []string{
		RunnerEnv + "=1",
		RunnerEngineEnv + "=" + t.String(),
		RunnerContextEnv + "=" + t.Context,
		"GORDON_STATE_DIR=" + p.StateDir,
		"DOCKER_HOST=unix://" + p.Socket,
		"TMPDIR=/tmp",
		"HOME=/tmp",
		"DOCKER_CONFIG=/tmp/.docker",
	}
	created, err := api.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:        image,
			Entrypoint:   []string{"/docker-gordon"},
			Cmd:          args,
			Env:          env,
			OpenStdin:    true,
			StdinOnce:    true,
			AttachStdin:  true,
			AttachStdout: true,
			AttachStderr: true,
			Labels:       map[string]string{docker.LabelManaged: "true", docker.LabelRole: RoleRunner},
		},
		HostConfig: &container.HostConfig{
			// The edge and the apps' loopback binds are on the host
			// network (readiness probes, the edge's admin address).
			NetworkMode: container.NetworkMode(cmp.Or(p.Network, "host")),
			AutoRemove:  true,
			Binds:       []string{p.Socket + ":" + p.Socket, p.StateDir + ":" + p.StateDir},
		},
	})
	if err != nil {
		return "", fmt.Errorf("create the runner container on %s: %w", t, dockererr.Classify(err))
	}
	return created.ID, nil
}

// startHeartbeat writes one zero byte to the runner's stdin every
// Heartbeat, so the runner tells a live CLI from a lost one; the
// returned function stops it (idempotent, waits for the writer).
func startHeartbeat(conn io.Writer) func() {
	hbStop, hbDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(hbDone)
		tick := time.NewTicker(Heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-hbStop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte{0}); err != nil {
					return
				}
			}
		}
	}()
	return sync.OnceFunc(func() { close(hbStop); <-hbDone })
}

// awaitRunner streams until the runner exits and returns its exit status.
// When ctx ends (Ctrl-C) the runner's stdin is closed (SIGTERM to it, or a
// kill when the close fails); further signals here do not end this process
// while the remote verb winds down, a third one gives up waiting (130).
func awaitRunner(ctx context.Context, s Streams, api client.APIClient, id string, att client.ContainerAttachResult, wait client.ContainerWaitResult, outDone <-chan error, stopHeartbeat func()) (int, error) {
	bg := context.WithoutCancel(ctx)
	// While the remote verb winds down after Ctrl-C, further signals must
	// not kill this process (its output and exit status are still to
	// come); a third one gives up waiting.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	interrupted := ctx.Done()
	extra := 0
	for {
		select {
		case <-interrupted:
			interrupted = nil
			// Stop the remote verb as Ctrl-C stops a local one (the
			// runner turns the end of its stdin into one SIGTERM);
			// keep streaming what it says while it winds down.
			stopHeartbeat()
			if err := att.CloseWrite(); err != nil {
				kctx, cancel := context.WithTimeout(bg, 10*time.Second)
				_, _ = api.ContainerKill(kctx, id, client.ContainerKillOptions{Signal: "SIGTERM"})
				cancel()
			}
		case <-sigs:
			if extra++; extra >= 3 {
				fmt.Fprintf(s.Err, "not waiting for the runner container %s any longer: it stops on its own (its stdin is closed)\n", shortID(id))
				return 130, nil
			}
		case err := <-wait.Error:
			<-outDoneOrTimeout(outDone)
			return 0, fmt.Errorf("wait for the runner container: %w", dockererr.Classify(err))
		case res := <-wait.Result:
			<-outDoneOrTimeout(outDone)
			if res.Error != nil && res.Error.Message != "" {
				return 0, fmt.Errorf("runner container: %s: %w", res.Error.Message, core.ErrUnavailable)
			}
			return int(res.StatusCode), nil
		}
	}
}

// outDoneOrTimeout waits for the output stream to end, at most 5 s after
// the container is gone.
func outDoneOrTimeout(done <-chan error) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		close(ch)
	}()
	return ch
}
