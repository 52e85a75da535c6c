// Package swarmlab brings up a multi-node Docker Swarm on one machine, as a
// test bed for the Swarm runtime.
//
// Each node is a dockerd (with its own managed containerd) in its own
// network namespace and UTS namespace (hostname = the node's name), with its
// own data-root, exec-root, pidfile, socket and default address pool. The
// nodes' eth0 are veth pairs to one bridge in a separate lab namespace, never
// the host's, so nothing the lab does touches the host's networks or the
// host's engine. A registry (Debian's docker-registry) listens in the lab
// namespace and every node trusts the lab subnet as an insecure registry, so
// the nodes pull one image by name (nothing is reachable outside).
//
// What works on these machines (measured): swarm init/join,
// attachable overlays across nodes by task IP and by dnsrr names, host-mode
// published ports. What does not: VIPs (no IP_VS), the ingress routing mesh,
// encrypted overlays (no ESP).
//
// Needs root, iproute2, nsenter and unshare (util-linux), dockerd and the
// docker CLI; the registry needs docker-registry on PATH.
package swarmlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Options shape a lab. The zero value is a 3-node lab under prefix "gsl".
type Options struct {
	// Nodes is the node count (default 3); node 1 is the manager.
	Nodes int
	// Prefix names the namespaces (<Prefix>-lab, <Prefix>-n1, …) and the
	// root directory /tmp/<Prefix>-lab (default "gsl"). Two labs at once
	// need distinct prefixes and subnets.
	Prefix string
	// Subnet is the first three octets of the lab's /24 (default
	// "10.78.0"): the bridge is .1, node I is .(10+I), the registry is
	// .1:5000.
	Subnet string
	// Managers promotes every node to manager when true.
	Managers bool
	// Registry starts the lab registry at <Subnet>.1:5000 (a missing
	// docker-registry binary is an error only when it is asked for).
	Registry bool
	// Log receives progress lines (nil: none).
	Log func(format string, args ...any)
}

// Node is one swarm node of a lab.
type Node struct {
	// Index is 1-based; Name is the node's hostname and swarm node name.
	Index int
	Name  string
	// NetNS is the node's network namespace name (under /var/run/netns).
	NetNS string
	// Host is the node engine's DOCKER_HOST (unix://…/d.sock), reachable
	// from the host.
	Host string
	// IP is the node's address on the lab bridge.
	IP  string
	dir string
}

// Lab is a running lab. Down stops it; a crashed test's leftovers are
// removed by the next Up with the same prefix.
type Lab struct {
	opts  Options
	Root  string
	LabNS string
	// Registry is host:port of the lab registry, reachable from the nodes
	// and from the lab namespace ("" without one).
	Registry string
	Nodes    []Node
}

func (o *Options) defaults() {
	if o.Nodes <= 0 {
		o.Nodes = 3
	}
	if o.Prefix == "" {
		o.Prefix = "gsl"
	}
	if o.Subnet == "" {
		o.Subnet = "10.78.0"
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// Up brings a lab up from nothing: what a previous lab of the same prefix
// left behind is removed first. It returns once every node's engine
// answers, the swarm has every node Ready and the registry (if asked for)
// answers. Errors name the step and the node's dockerd log tail.
func Up(ctx context.Context, opts Options) (*Lab, error) {
	l := Existing(opts)
	opts = l.opts
	if err := l.Down(); err != nil {
		return nil, fmt.Errorf("swarmlab: removing a previous lab %s: %w", opts.Prefix, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = l.Down()
		}
	}()
	if err := l.network(ctx); err != nil {
		return nil, err
	}
	if opts.Registry {
		if err := l.startRegistry(); err != nil {
			return nil, err
		}
	}
	for _, n := range l.Nodes {
		if err := l.startNode(ctx, n); err != nil {
			return nil, err
		}
	}
	for _, n := range l.Nodes {
		if err := l.waitEngine(ctx, n); err != nil {
			return nil, err
		}
	}
	if err := l.formSwarm(ctx); err != nil {
		return nil, err
	}
	if opts.Registry {
		if err := l.waitRegistry(ctx); err != nil {
			return nil, err
		}
	}
	ok = true
	return l, nil
}

// Existing describes the lab opts name without starting or checking
// anything: for Down or Docker on a lab another process brought up.
func Existing(opts Options) *Lab {
	opts.defaults()
	l := &Lab{opts: opts, Root: "/tmp/" + opts.Prefix + "-lab", LabNS: opts.Prefix + "-lab"}
	if opts.Registry {
		l.Registry = opts.Subnet + ".1:5000"
	}
	for i := 1; i <= opts.Nodes; i++ {
		dir := filepath.Join(l.Root, "n"+strconv.Itoa(i))
		l.Nodes = append(l.Nodes, Node{
			Index: i, Name: fmt.Sprintf("%s-n%d", opts.Prefix, i), NetNS: fmt.Sprintf("%s-n%d", opts.Prefix, i),
			Host: "unix://" + filepath.Join(dir, "d.sock"), IP: fmt.Sprintf("%s.%d", opts.Subnet, 10+i), dir: dir,
		})
	}
	return l
}

// network creates the lab namespace with its bridge and one namespace per
// node joined to the bridge by a veth pair.
func (l *Lab) network(ctx context.Context) error {
	sub := l.opts.Subnet
	steps := [][]string{
		{"ip", "netns", "add", l.LabNS},
		{"ip", "-n", l.LabNS, "link", "set", "lo", "up"},
		{"ip", "-n", l.LabNS, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", l.LabNS, "addr", "add", sub + ".1/24", "dev", "br0"},
		{"ip", "-n", l.LabNS, "link", "set", "br0", "up"},
	}
	for _, n := range l.Nodes {
		peer := "n" + strconv.Itoa(n.Index)
		steps = append(steps,
			[]string{"ip", "netns", "add", n.NetNS},
			[]string{"ip", "-n", n.NetNS, "link", "set", "lo", "up"},
			[]string{"ip", "link", "add", "eth0", "netns", n.NetNS, "type", "veth", "peer", "name", peer, "netns", l.LabNS},
			[]string{"ip", "-n", l.LabNS, "link", "set", peer, "master", "br0", "up"},
			[]string{"ip", "-n", n.NetNS, "addr", "add", n.IP + "/24", "dev", "eth0"},
			[]string{"ip", "-n", n.NetNS, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("swarmlab: %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	l.opts.Log("lab network %s.0/24 in namespace %s, %d nodes", sub, l.LabNS, len(l.Nodes))
	return nil
}

// startNode starts node n's dockerd in its namespaces, detached from this
// process (its own session), logging to <dir>/dockerd.log.
func (l *Lab) startNode(ctx context.Context, n Node) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("swarmlab: %w", err)
	}
	logf, err := os.Create(filepath.Join(n.dir, "dockerd.log"))
	if err != nil {
		return fmt.Errorf("swarmlab: %w", err)
	}
	defer logf.Close()
	dockerd := strings.Join([]string{"exec dockerd",
		"--data-root", filepath.Join(n.dir, "root"), "--exec-root", filepath.Join(n.dir, "exec"),
		"--pidfile", filepath.Join(n.dir, "pid"), "-H", n.Host,
		"--default-address-pool", fmt.Sprintf("base=10.%d.0.0/16,size=24", 210+n.Index),
		"--insecure-registry", l.opts.Subnet + ".0/24", "--label", "gordon.lab.node=" + n.Name,
		// Where the node's socket is on this machine: docker gordon's
		// runner mounts it when the node is reached as a remote engine.
		"--label", "dev.gordon.docker-socket=" + strings.TrimPrefix(n.Host, "unix://"),
	}, " ")
	// Its own UTS namespace, so each node has its own hostname (swarm node
	// names and node.hostname constraints).
	cmd := exec.Command("nsenter", "--net=/var/run/netns/"+n.NetNS, "unshare", "--uts", "sh", "-c",
		"hostname "+n.Name+" && "+dockerd)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = detached()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("swarmlab: start dockerd of %s: %w", n.Name, err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// Docker runs the docker CLI against node i (1-based) and returns its
// trimmed combined output; an error carries the output.
func (l *Lab) Docker(ctx context.Context, i int, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+l.Nodes[i-1].Host)
	out, err := cmd.CombinedOutput()
	s := strings.TrimSpace(string(out))
	if err != nil {
		return s, fmt.Errorf("docker %s on %s: %v: %s", strings.Join(args, " "), l.Nodes[i-1].Name, err, s)
	}
	return s, nil
}

// InLab runs argv in the lab namespace (a client on the lab bridge, which
// reaches every node's IP) and returns its trimmed combined output.
func (l *Lab) InLab(ctx context.Context, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=/var/run/netns/" + l.LabNS}, argv...)...)
	out, err := cmd.CombinedOutput()
	s := strings.TrimSpace(string(out))
	if err != nil {
		return s, fmt.Errorf("%s in %s: %v: %s", strings.Join(argv, " "), l.LabNS, err, s)
	}
	return s, nil
}

// waitEngine polls node n's engine until it answers (deadline 60 s).
func (l *Lab) waitEngine(ctx context.Context, n Node) error {
	err := poll(ctx, 60*time.Second, func() bool {
		_, err := l.Docker(ctx, n.Index, "info", "--format", "{{.ID}}")
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("swarmlab: engine of %s did not answer within 60 s: %v; its log ends: %s", n.Name, err, tail(filepath.Join(n.dir, "dockerd.log"), 5))
	}
	return nil
}

// formSwarm inits the swarm on node 1, joins the others (as managers when
// Options.Managers) and waits until every node is Ready (deadline 60 s).
func (l *Lab) formSwarm(ctx context.Context) error {
	m := l.Nodes[0]
	if _, err := l.Docker(ctx, 1, "swarm", "init", "--advertise-addr", m.IP, "--listen-addr", m.IP+":2377",
		"--default-addr-pool", "10.101.0.0/16", "--default-addr-pool-mask-length", "24"); err != nil {
		return fmt.Errorf("swarmlab: %w", err)
	}
	role := "worker"
	if l.opts.Managers {
		role = "manager"
	}
	tok, err := l.Docker(ctx, 1, "swarm", "join-token", "-q", role)
	if err != nil {
		return fmt.Errorf("swarmlab: %w", err)
	}
	errs := make(chan error, len(l.Nodes))
	for _, n := range l.Nodes[1:] {
		go func() {
			_, err := l.Docker(ctx, n.Index, "swarm", "join", "--token", tok, "--advertise-addr", n.IP,
				"--listen-addr", n.IP+":2377", m.IP+":2377")
			errs <- err
		}()
	}
	var joinErr error
	for range l.Nodes[1:] {
		joinErr = errors.Join(joinErr, <-errs)
	}
	if joinErr != nil {
		return fmt.Errorf("swarmlab: join: %w", joinErr)
	}
	err = poll(ctx, 60*time.Second, func() bool {
		out, err := l.Docker(ctx, 1, "node", "ls", "--format", "{{.Status}}")
		return err == nil && strings.Count(out, "Ready") >= len(l.Nodes)
	})
	if err != nil {
		out, _ := l.Docker(ctx, 1, "node", "ls")
		return fmt.Errorf("swarmlab: not every node Ready within 60 s: %v\n%s", err, out)
	}
	l.opts.Log("swarm of %d nodes (manager %s at %s)", len(l.Nodes), m.Name, m.IP)
	return nil
}

// poll calls ok every 100 ms until it is true, the deadline passes
// (context.DeadlineExceeded) or ctx ends.
func poll(ctx context.Context, within time.Duration, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if ok() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// tail is the last n lines of file (for error messages).
func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
