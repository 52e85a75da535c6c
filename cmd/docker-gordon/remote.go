package main

// Remote engines. An engine reached through a unix socket on this machine
// is local and every verb runs here. Any other endpoint (ssh://, tcp://, a
// context naming one) is remote: the verb runs on the engine's machine, in
// a short-lived runner container built there FROM scratch from this very
// binary (runnerImage), with the engine's socket and the server's state
// directory bind-mounted at their own paths, so the journal, the locks, the
// secrets and the edge's route table stay next to the engine. The CLI sends
// what the verb needs over the container's stdin (runnerBundle), streams
// its stdout and stderr, and exits with its exit status. Closing that stdin
// (Ctrl-C here, or a lost connection) interrupts the remote verb as SIGTERM
// interrupts a local one (runner.go).

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

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
	"github.com/gordon-deploy/docker-gordon/system/docker"
	"github.com/gordon-deploy/docker-gordon/system/image"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// Engine labels (dockerd --label) that move a server's gordon paths: the
// state directory and the engine's unix socket as seen on that machine.
const (
	engineLabelStateDir = "dev.gordon.state-dir"
	engineLabelSocket   = "dev.gordon.docker-socket"

	defaultServerStateDir = "/var/lib/docker-gordon"
	defaultServerSocket   = "/var/run/docker.sock"

	roleRunner = "runner"

	// remoteStateDirEnv, set on the client, overrides the server's state
	// directory (an engine one cannot relabel, tests).
	remoteStateDirEnv = "GORDON_REMOTE_STATE_DIR"
)

// engineTarget is the engine a verb acts on.
type engineTarget struct {
	Context string // docker context name ("default" without one)
	Host    string // endpoint (unix:///var/run/docker.sock, tcp://…, ssh://…)
	Remote  bool   // not a unix socket on this machine
}

func (t engineTarget) String() string {
	where := "local"
	if t.Remote {
		where = "remote"
	}
	return fmt.Sprintf("context %s (%s, %s)", t.Context, t.Host, where)
}

// resolveTarget reads the engine the docker CLI is pointed at (--context,
// DOCKER_CONTEXT, DOCKER_HOST, the current context).
func resolveTarget(dockerCli command.Cli) engineTarget {
	t := engineTarget{Context: dockerCli.CurrentContext(), Host: dockerCli.DockerEndpoint().Host}
	if t.Context == "" {
		t.Context = "default"
	}
	if t.Host == "" {
		t.Host = client.DefaultDockerHost
	}
	t.Remote = isRemoteEndpoint(t.Host)
	return t
}

// isRemoteEndpoint: a unix socket (or a Windows named pipe) is this
// machine's; every other scheme reaches another one.
func isRemoteEndpoint(host string) bool {
	return !strings.HasPrefix(host, "unix://") && !strings.HasPrefix(host, "npipe://")
}

// verbPath is the command's path below the gordon root ("edge", "start");
// empty for the root itself. (Under the docker CLI the root's parent is
// "docker".)
func verbPath(cmd *cobra.Command) []string {
	var path []string
	for c := cmd; c != nil && c.Name() != "gordon"; c = c.Parent() {
		path = append([]string{c.Name()}, path...)
	}
	return path
}

// localOnly are the verbs that need no engine: they always run here
// (validate and convert read the -f files of this machine).
func localOnly(cmd *cobra.Command) bool {
	path := verbPath(cmd)
	if len(path) == 0 {
		return true // the root: help, or an unknown verb
	}
	switch path[0] {
	case "version", "validate", "convert", "help", "completion", "__complete", "__completeNoDesc":
		return true
	}
	return false
}

// routeEngine runs before every verb: it prints the verb's first progress
// line (the engine it acts on) and, for a remote engine, turns the verb into
// a runner-container run. In a runner the engine is local by construction
// and the CLI that started it has already named the engine.
func (e *cliEnv) routeEngine(cmd *cobra.Command) error {
	if runnerSession != nil || localOnly(cmd) {
		return nil
	}
	t := resolveTarget(e.dockerCli)
	e.target = t
	fmt.Fprintf(e.dockerCli.Err(), "engine: %s\n", t)
	if !t.Remote {
		if !e.platform().NeedsRunner(runnerSession != nil) || cmd.Annotations[annotationRemoteSelf] == "true" {
			return nil
		}
		// A swarm's state directory: the verb runs in a runner on the
		// edge overlay, as for a remote engine (swarm.go).
		cmd.Run = nil
		cmd.RunE = func(cmd *cobra.Command, args []string) error { return runRemote(cmd, e, args) }
		return nil
	}
	if cmd.Flags().Changed("state-dir") {
		return fmt.Errorf("--state-dir applies to a local engine only: the state of %s lives on that engine's machine (in %s there, or the path its engine label %s names); nothing was changed",
			t, defaultServerStateDir, engineLabelStateDir)
	}
	if cmd.Annotations[annotationRemoteSelf] == "true" {
		// A verb marked remote-self (exec) reaches the engine itself.
		return nil
	}
	cmd.Run = nil
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return runRemote(cmd, e, args) }
	return nil
}

// serverPaths are the runner's bind mounts on the engine's machine.
type serverPaths struct {
	StateDir string
	Socket   string
	Arch     string
	// Network is the runner's network: the edge overlay on a swarm
	// manager that has one, else "" (the host network).
	Network string
}

// readServerPaths takes the state directory and the socket from the engine's
// labels, else the defaults; GORDON_REMOTE_STATE_DIR on the client wins over
// both for the state directory.
func readServerPaths(ctx context.Context, api client.APIClient) (serverPaths, error) {
	p := serverPaths{StateDir: defaultServerStateDir, Socket: defaultServerSocket}
	info, err := api.Info(ctx, client.InfoOptions{})
	if err != nil {
		return p, fmt.Errorf("engine info: %w", dockererr.Classify(err))
	}
	for _, l := range info.Info.Labels {
		k, v, _ := strings.Cut(l, "=")
		switch k {
		case engineLabelStateDir:
			p.StateDir = v
		case engineLabelSocket:
			p.Socket = v
		}
	}
	if d := os.Getenv(remoteStateDirEnv); d != "" {
		p.StateDir = d
	}
	p.Arch = info.Info.Architecture
	if info.Info.Swarm.ControlAvailable {
		if _, err := api.NetworkInspect(ctx, swarm.DefaultNetwork, client.NetworkInspectOptions{}); err == nil {
			p.Network = swarm.DefaultNetwork
		}
	}
	return p, nil
}

// runnerImage builds (or finds, cached by content) the runner image on the
// engine: this binary as /docker-gordon and gordon-edge beside it when it is
// installed (edge start and system start build the edge's image there).
func runnerImage(ctx context.Context, api client.APIClient) (image.Image, error) {
	self, err := os.Executable()
	if err != nil {
		return image.Image{}, fmt.Errorf("find own executable: %w", err)
	}
	bins := map[string]string{"/docker-gordon": self}
	if edge, err := findEdgeBinary(); err == nil {
		bins["/gordon-edge"] = edge
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
	img, err := image.Build(ctx, api, "runner", bins, map[string]string{docker.LabelManaged: "true", docker.LabelRole: roleRunner})
	if err == nil && key != "" {
		if data, merr := json.Marshal(runnerImageCache{Key: key, Ref: img.Ref}); merr == nil && os.MkdirAll(filepath.Dir(cacheFile), 0o700) == nil {
			_ = writeFileAtomic(cacheFile, data)
		}
	}
	return img, err
}

// pruneRunnerImages removes the runner images of other versions (best
// effort: the engine refuses to remove one a runner still uses).
func pruneRunnerImages(ctx context.Context, api client.APIClient, keep string) {
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

// runnerArgs rebuilds the verb's command line for the runner from what
// cobra parsed: the verb path, every flag the user set (repeatable flags
// once per value) except those the client consumes (drop) or rewrites
// (extra), then the positional arguments.
func runnerArgs(cmd *cobra.Command, args []string, drop map[string]bool, extra []string) []string {
	out := append([]string{"gordon"}, verbPath(cmd)...)
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if drop[f.Name] {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+f.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+f.Name+"="+f.Value.String())
	})
	out = append(out, extra...)
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			out = append(out, "--")
			break
		}
	}
	return append(out, args...)
}

// runRemote runs the verb in a runner container on the target engine.
func runRemote(cmd *cobra.Command, e *cliEnv, args []string) error {
	ctx := cmd.Context()
	api := e.dockerCli.Client()
	t := e.target
	t0 := time.Now()
	paths, err := readServerPaths(ctx, api)
	if err != nil {
		return err
	}
	if !t.Remote {
		// This machine's engine, a swarm manager: same paths as here.
		paths.StateDir, paths.Socket = e.opts.stateDir, strings.TrimPrefix(t.Host, "unix://")
	}
	rc, err := prepareBundle(ctx, cmd, e, args, paths)
	if err != nil {
		return err
	}
	if paths.Network != "" && rc.copyImages {
		return fmt.Errorf("--copy-images: %s is a swarm manager and every node pulls an instance's image by digest from a registry; an image sent to the manager alone reaches no other node: push it to a registry the nodes can pull from; nothing was changed: %w", t, core.ErrInvalid)
	}
	if rc.shipImages && paths.Network == "" {
		if err := shipImages(ctx, e, rc.images, rc.copyImages); err != nil {
			return err
		}
	}
	b, runArgs := rc.bundle, rc.args
	img, err := runnerImage(ctx, api)
	if err != nil {
		return fmt.Errorf("runner image on %s: %w", t, err)
	}
	if img.Built {
		fmt.Fprintf(e.dockerCli.Err(), "built the runner image %s on %s in %s (once per version)\n", img.Ref, t.Context, time.Since(t0).Round(time.Millisecond))
		pruneRunnerImages(ctx, api, img.ID)
	}
	e.logger.Debug("runner", "image", img.Ref, "args", runArgs, "state_dir", paths.StateDir, "socket", paths.Socket)
	code, err := runRunner(ctx, e, api, img.Ref, paths, runArgs, b)
	e.logger.Debug("runner finished", "exit", code, "elapsed", time.Since(t0))
	if err != nil {
		return err
	}
	if code != 0 {
		// The runner has said why on stderr already.
		return cli.StatusError{StatusCode: code}
	}
	return nil
}

// runRunner creates the runner container, attaches to it, starts it, sends
// the bundle and streams its output until it exits; it returns the exit
// status. Ctrl-C (ctx done) closes the runner's stdin and signals it
// SIGTERM: the remote verb stops as a local one does, and its output and
// exit status still arrive here.
func runRunner(ctx context.Context, e *cliEnv, api client.APIClient, image string, p serverPaths, args []string, b runnerBundle) (int, error) {
	bg := context.WithoutCancel(ctx)
	id, err := createRunner(ctx, e, api, image, p, args)
	if err != nil {
		return 0, err
	}
	e.logger.Debug("runner created", "id", shortID(id))
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
	e.logger.Debug("runner started")
	if err := writeBundle(att.Conn, b); err != nil {
		removeRunner()
		return 0, fmt.Errorf("send the verb's input to the runner: %w", err)
	}
	stopHeartbeat := startHeartbeat(att.Conn)
	defer stopHeartbeat()
	outDone := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(e.dockerCli.Out(), e.dockerCli.Err(), att.Reader)
		outDone <- err
	}()
	return awaitRunner(ctx, e, api, id, att, wait, outDone, stopHeartbeat)
}

// createRunner creates the runner container (not started): this binary
// running args on the host network, the engine's socket and the server's
// state directory mounted at their own paths, stdin open for the bundle;
// removed by the engine once it exits.
func createRunner(ctx context.Context, e *cliEnv, api client.APIClient, image string, p serverPaths, args []string) (string, error) {
	env := []string{
		runnerEnv + "=1",
		runnerEngineEnv + "=" + e.target.String(),
		runnerContextEnv + "=" + e.target.Context,
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
			Labels:       map[string]string{docker.LabelManaged: "true", docker.LabelRole: roleRunner},
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
		return "", fmt.Errorf("create the runner container on %s: %w", e.target, dockererr.Classify(err))
	}
	return created.ID, nil
}

// startHeartbeat writes one zero byte to the runner's stdin every
// runnerHeartbeat, so the runner tells a live CLI from a lost one; the
// returned function stops it (idempotent, waits for the writer).
func startHeartbeat(conn io.Writer) func() {
	hbStop, hbDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(hbDone)
		tick := time.NewTicker(runnerHeartbeat)
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
func awaitRunner(ctx context.Context, e *cliEnv, api client.APIClient, id string, att client.ContainerAttachResult, wait client.ContainerWaitResult, outDone <-chan error, stopHeartbeat func()) (int, error) {
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
				fmt.Fprintf(e.dockerCli.Err(), "not waiting for the runner container %s any longer: it stops on its own (its stdin is closed)\n", shortID(id))
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
