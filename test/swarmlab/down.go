package swarmlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// detached puts a started process in its own session, so a test's end or
// a Ctrl-C of `go test` does not signal the lab's daemons; Down stops them.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// Down stops every daemon of the lab (SIGTERM to each dockerd, then after
// 30 s SIGKILL to every process whose command line names the lab's root),
// unmounts what is left under the root, deletes the namespaces and removes
// the root. It is safe on a lab that is half up or already down.
func (l *Lab) Down() error {
	var pids []int
	for _, n := range l.Nodes {
		if pid := readPid(filepath.Join(n.dir, "pid")); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			pids = append(pids, pid)
		}
	}
	_ = poll(context.Background(), 30*time.Second, func() bool {
		for _, p := range pids {
			if syscall.Kill(p, 0) == nil {
				return false
			}
		}
		return true
	})
	for _, p := range processesNaming(l.Root + "/") {
		killTree(p)
	}
	if pid := readPid(filepath.Join(l.Root, "registry", "pid")); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	unmountUnder(l.Root + "/")
	var errs error
	for _, ns := range append([]string{l.LabNS}, nodeNetNS(l)...) {
		if _, err := os.Stat("/var/run/netns/" + ns); err == nil {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				errs = errors.Join(errs, fmt.Errorf("ip netns del %s: %v: %s", ns, err, strings.TrimSpace(string(out))))
			}
		}
	}
	if err := os.RemoveAll(l.Root); err != nil {
		errs = errors.Join(errs, err)
	}
	return errs
}

func nodeNetNS(l *Lab) []string {
	var out []string
	for _, n := range l.Nodes {
		out = append(out, n.NetNS)
	}
	return out
}

func readPid(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// processesNaming lists the pids whose command line contains s (the lab's
// dockerd, containerd, shims and registry all name its root).
func processesNaming(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, pid)
		}
	}
	return out
}

// killTree sends SIGKILL to pid and its descendants (a dead dockerd's
// containers are children of their shims).
func killTree(pid int) {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				killTree(c)
			}
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// unmountUnder lazily unmounts every mount point under prefix, deepest
// first.
func unmountUnder(prefix string) {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], prefix) {
			points = append(points, f[1])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// startRegistry starts docker-registry in the lab namespace at .1:5000.
func (l *Lab) startRegistry() error {
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		return fmt.Errorf("swarmlab: the lab registry needs docker-registry on PATH (apt-get install docker-registry): %w", err)
	}
	dir := filepath.Join(l.Root, "registry")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("swarmlab: %w", err)
	}
	l.Registry = l.opts.Subnet + ".1:5000"
	cfg := fmt.Sprintf("version: 0.1\nlog: {level: warn}\nstorage: {filesystem: {rootdirectory: %s}, delete: {enabled: true}}\nhttp: {addr: %q}\n",
		filepath.Join(dir, "data"), l.Registry)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("swarmlab: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return fmt.Errorf("swarmlab: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command("nsenter", "--net=/var/run/netns/"+l.LabNS, bin, "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = detached()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("swarmlab: start the registry: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// waitRegistry polls the registry's /v2/ from a node (deadline 30 s).
func (l *Lab) waitRegistry(ctx context.Context) error {
	err := poll(ctx, 30*time.Second, func() bool {
		_, err := l.InLab(ctx, "bash", "-c", "exec 3<>/dev/tcp/"+strings.Replace(l.Registry, ":", "/", 1))
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("swarmlab: the registry at %s did not answer within 30 s: %v; its log ends: %s", l.Registry, err, tail(filepath.Join(l.Root, "registry", "log"), 5))
	}
	return nil
}

// PushImage builds a FROM-scratch image of the static binary bin on node 1
// (ENTRYPOINT the binary, ENV env as K=V lines) and pushes it to the lab
// registry as <registry>/<name>; it returns that reference, which every
// node can pull.
func (l *Lab) PushImage(ctx context.Context, name, bin string, env ...string) (string, error) {
	lines := make([]string, 0, len(env))
	for _, kv := range env {
		lines = append(lines, "ENV "+kv)
	}
	return l.PushImageWith(ctx, name, bin, lines...)
}

// PushImageWith is PushImage with Dockerfile instructions (ENV,
// HEALTHCHECK, STOPSIGNAL...) written after the COPY, one a line.
func (l *Lab) PushImageWith(ctx context.Context, name, bin string, lines ...string) (string, error) {
	if l.Registry == "" {
		return "", errors.New("swarmlab: PushImage needs a lab started with Options.Registry")
	}
	dir, err := os.MkdirTemp("", "swarmlab-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("swarmlab: image %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app"), b, 0o755); err != nil {
		return "", err
	}
	df := "FROM scratch\nCOPY app /app\n"
	for _, line := range lines {
		df += line + "\n"
	}
	df += "ENTRYPOINT [\"/app\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return "", err
	}
	ref := l.Registry + "/" + name
	cmd := exec.CommandContext(ctx, "docker", "build", "-q", "-t", ref, dir)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+l.Nodes[0].Host, "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("swarmlab: build %s on %s: %v: %s", ref, l.Nodes[0].Name, err, out)
	}
	if _, err := l.Docker(ctx, 1, "push", "-q", ref); err != nil {
		return "", fmt.Errorf("swarmlab: push: %w", err)
	}
	return ref, nil
}

// KillNode simulates node i's (1-based) power loss: SIGKILL to its dockerd
// and every process of its containers (containerd, the shims and what
// they run), nothing stopped cleanly. Its network namespace stays (its
// addresses answer nothing but resets), so the swarm sees a node that
// stopped heartbeating: marked down after about 11 s. Down still cleans
// up after it.
func (l *Lab) KillNode(i int) error {
	n := l.Nodes[i-1]
	pid := readPid(filepath.Join(n.dir, "pid"))
	if pid <= 0 {
		return fmt.Errorf("swarmlab: node %s has no dockerd pid", n.Name)
	}
	killTree(pid)
	// The shims are reparented away from dockerd; find them (and so
	// their containers) by the node's directory on their command line.
	for _, p := range processesNaming(n.dir + "/") {
		killTree(p)
	}
	return nil
}
