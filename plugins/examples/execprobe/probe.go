package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

const (
	// Protocol is the probe plugin protocol version this plugin speaks.
	Protocol = 1
	// AttemptCap bounds one attempt when the engine sends no AttemptTimeout.
	AttemptCap = 5 * time.Second
	// MaxDetail is how many bytes of the command's output go into Detail.
	MaxDetail = 512
	// inspectEvery is the pause between exec inspections after the output ended.
	inspectEvery = 20 * time.Millisecond
)

// configSchema is the JSON schema Describe reports.
const configSchema = `{"type":"object","additionalProperties":false,"required":["command"],"properties":{"command":{"type":"array","minItems":1,"items":{"type":"string"}},"user":{"type":"string"}}}`

// Config is [services.<name>.readiness.config] of the exec probe.
type Config struct {
	// Command is the argv run inside the container (required, no shell:
	// FROM scratch images have none).
	Command []string `json:"command"`
	// User runs the command as this user ("uid[:gid]" or a name); empty =
	// the container's user.
	User string `json:"user,omitempty"`
}

// Prober is the exec readiness probe. The Docker client is created on
// first use from the environment.
type Prober struct {
	mu  sync.Mutex
	cli *client.Client
	// newClient makes the Docker client; nil = client.New(client.FromEnv).
	newClient func() (*client.Client, error)
}

var _ core.Prober = (*Prober)(nil)

// New returns the prober; the Docker connection is opened by the first Check.
func New() *Prober { return &Prober{} }

// Describe returns name "exec", protocol 1 and the config schema.
func (p *Prober) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "exec", Protocol: Protocol, ConfigSchema: configSchema, Version: "1"}, nil
}

// ValidateConfig requires {"command": [non-empty strings, at least one]}
// and accepts an optional string "user"; one message per problem (absent
// config, unknown key, wrong type, empty command).
func (p *Prober) ValidateConfig(_ context.Context, config json.RawMessage) ([]string, error) {
	_, problems := parseConfig(config)
	return problems, nil
}

func parseConfig(config json.RawMessage) (Config, []string) {
	var c Config
	trimmed := bytes.TrimSpace(config)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return c, []string{`exec probe: config.command is required, e.g. [services.web.readiness.config] command = ["/app", "-check"]`}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(config, &m); err != nil {
		return c, []string{fmt.Sprintf("exec probe: config must be a table (JSON object): %v", err)}
	}
	var problems []string
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "command":
			if err := json.Unmarshal(m[k], &c.Command); err != nil {
				problems = append(problems, fmt.Sprintf("exec probe: config.command must be an array of strings (argv, no shell), got %s", m[k]))
				continue
			}
			if len(c.Command) == 0 || c.Command[0] == "" {
				problems = append(problems, "exec probe: config.command must name a program: at least one non-empty element")
			}
		case "user":
			if err := json.Unmarshal(m[k], &c.User); err != nil {
				problems = append(problems, fmt.Sprintf("exec probe: config.user must be a string, got %s", m[k]))
			}
		default:
			problems = append(problems, fmt.Sprintf("exec probe: unknown config key %q: allowed keys are \"command\" and \"user\"", k))
		}
	}
	if _, ok := m["command"]; !ok {
		problems = append(problems, `exec probe: config.command is required, e.g. command = ["/app", "-check"]`)
	}
	return c, problems
}

// docker returns the shared client, creating it on first use.
func (p *Prober) docker() (*client.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cli != nil {
		return p.cli, nil
	}
	mk := p.newClient
	if mk == nil {
		mk = func() (*client.Client, error) { return client.New(client.FromEnv) }
	}
	cli, err := mk()
	if err != nil {
		return nil, fmt.Errorf("%w: exec probe: docker client from the environment (DOCKER_HOST): %w", core.ErrUnavailable, err)
	}
	p.cli = cli
	return cli, nil
}

// Check runs config.command once inside target.ContainerID (exec create,
// attach, inspect) bounded by req.AttemptTimeout (zero or above 5 s: 5 s)
// and ctx. Ready iff it exits 0. Detail is "exit N: <output>" with stdout
// and stderr interleaved, at most 512 bytes (longer output ends with
// "…"). A command still running at the attempt's end is not ready with
// detail "no exit within …" (Docker cannot kill an exec: keep check
// commands short). Not ready is (ProbeResult{Ready:false, Detail}, nil),
// also when the program does not exist (exit 126/127 or the engine's
// refusal). Errors: ctx's own error as is (R32.3); an invalid config or an
// empty container ID wraps core.ErrInvalid; a missing container wraps
// core.ErrNotFound; an unreachable engine wraps core.ErrUnavailable.
func (p *Prober) Check(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
	if err := ctx.Err(); err != nil {
		return core.ProbeResult{}, err
	}
	t := req.Target
	where := fmt.Sprintf("exec probe of app %s service %s container %s", t.App, t.Service, short(t.ContainerID))
	cfg, problems := parseConfig(req.Config)
	if len(problems) > 0 {
		return core.ProbeResult{}, fmt.Errorf("%w: %s: %s", core.ErrInvalid, where, strings.Join(problems, "; "))
	}
	if t.ContainerID == "" {
		return core.ProbeResult{}, fmt.Errorf("%w: %s: no container ID", core.ErrInvalid, where)
	}
	cli, err := p.docker()
	if err != nil {
		return core.ProbeResult{}, err
	}
	timeout := req.AttemptTimeout
	if timeout <= 0 || timeout > AttemptCap {
		timeout = AttemptCap
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := strings.Join(cfg.Command, " ")

	created, err := cli.ExecCreate(actx, t.ContainerID, client.ExecCreateOptions{
		Cmd: cfg.Command, User: cfg.User, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return p.failed(ctx, actx, where, "exec create", argv, timeout, err)
	}
	att, err := cli.ExecAttach(actx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return p.failed(ctx, actx, where, "exec start", argv, timeout, err)
	}
	out := &capped{max: MaxDetail}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(out, out, att.Reader)
		copied <- err
	}()
	select {
	case <-copied:
	case <-actx.Done():
		att.Close()
		<-copied
		if ctx.Err() != nil {
			return core.ProbeResult{}, ctx.Err()
		}
		return core.ProbeResult{Detail: fmt.Sprintf("%s: no exit within %s; output: %s", argv, timeout, out)}, nil
	}
	att.Close()
	for {
		ins, err := cli.ExecInspect(actx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return p.failed(ctx, actx, where, "exec inspect", argv, timeout, err)
		}
		if !ins.Running {
			detail := fmt.Sprintf("%s: exit %d", argv, ins.ExitCode)
			if s := out.String(); s != "" {
				detail += ": " + s
			}
			return core.ProbeResult{Ready: ins.ExitCode == 0, Detail: detail}, nil
		}
		select {
		case <-actx.Done():
		case <-time.After(inspectEvery):
		}
	}
}

// failed classifies an engine error of one attempt.
func (p *Prober) failed(ctx, actx context.Context, where, step, argv string, timeout time.Duration, err error) (core.ProbeResult, error) {
	switch {
	case ctx.Err() != nil:
		return core.ProbeResult{}, ctx.Err()
	case actx.Err() != nil:
		return core.ProbeResult{Detail: fmt.Sprintf("%s: %s: no answer within %s", argv, step, timeout)}, nil
	case cerrdefs.IsNotFound(err):
		return core.ProbeResult{}, fmt.Errorf("%w: %s: %s: %w", core.ErrNotFound, where, step, err)
	case cerrdefs.IsConflict(err) || cerrdefs.IsInvalidArgument(err) || isExecStartFailure(err):
		// Container not running yet / restarting, or the program is missing:
		// not ready, the engine retries.
		return core.ProbeResult{Detail: fmt.Sprintf("%s: %s: %v", argv, step, err)}, nil
	case client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded):
		return core.ProbeResult{}, fmt.Errorf("%w: %s: %s: %w", core.ErrUnavailable, where, step, err)
	}
	return core.ProbeResult{Detail: fmt.Sprintf("%s: %s: %v", argv, step, err)}, nil
}

// isExecStartFailure matches the engine's refusal to start a missing program.
func isExecStartFailure(err error) bool {
	s := err.Error()
	return strings.Contains(s, "executable file not found") || strings.Contains(s, "no such file or directory") || strings.Contains(s, "OCI runtime exec failed")
}

// capped keeps the first max bytes written to it (a writer of both streams).
type capped struct {
	mu        sync.Mutex
	max       int
	buf       bytes.Buffer
	truncated bool
}

func (c *capped) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.buf.Len()
	switch {
	case room <= 0:
		c.truncated = c.truncated || len(b) > 0
	case len(b) > room:
		c.buf.Write(b[:room])
		c.truncated = true
	default:
		c.buf.Write(b)
	}
	return len(b), nil
}

// String returns the kept output, trimmed, with "…" when truncated.
func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := strings.TrimSpace(strings.ToValidUTF8(c.buf.String(), "?"))
	if c.truncated {
		s += "…"
	}
	return s
}

var _ io.Writer = (*capped)(nil)

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
