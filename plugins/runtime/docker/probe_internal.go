package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/image"
)

// EnvProbeHelper carries a HelperRequest (JSON) into the internal probe
// helper container; the binary that sees it runs the probe and exits (see
// runProbeHelperIfRequested in cmd/docker-gordon).
const EnvProbeHelper = "GORDON_PROBE_HELPER"

// HelperRequest is what the helper probes: Address is "<container
// name>:<port>" on the helper's network.
type HelperRequest struct {
	Type      string `json:"type"`
	Address   string `json:"address"`
	Path      string `json:"path,omitempty"`
	Host      string `json:"host,omitempty"`
	TimeoutMS int64  `json:"timeout_ms"`
}

// HelperResult is the helper's last stdout line (JSON).
type HelperResult struct {
	Ready    bool   `json:"ready"`
	Attempts int    `json:"attempts"`
	Detail   string `json:"detail,omitempty"`
}

// ProbeInternal implements core.InternalProber (R30, decision 18): it runs
// the probe in a short-lived helper container on the probed container's
// network (its primary network), dialling the container by its name, so the
// port is never published. The helper image is built FROM scratch from this
// process's own static binary (gordon-system/probe-helper:<hash>, like the
// system containers) and the helper container is removed when it ends.
// The helper runs the same HTTP and TCP checks as the loopback probes
// (R31–R33) under p.Timeout; the call waits at most p.Timeout + 20 s.
// Errors: the container is gone (core.ErrNotFound), it has no network, the
// image cannot be built, or the helper fails to report.
func (r *Runtime) ProbeInternal(ctx context.Context, p core.InternalProbe) (core.InternalProbeResult, error) {
	if err := r.connect(ctx); err != nil {
		return core.InternalProbeResult{}, err
	}
	what := fmt.Sprintf("internal probe of container %s port %d", short(p.Container), p.Port)
	ins, err := r.cli.ContainerInspect(ctx, p.Container, client.ContainerInspectOptions{})
	if err != nil {
		return core.InternalProbeResult{}, r.classify(err, what)
	}
	c := ins.Container
	name := strings.TrimPrefix(c.Name, "/")
	netName := ""
	if c.HostConfig != nil {
		netName = string(c.HostConfig.NetworkMode)
	}
	if netName == "" || netName == "default" || netName == "bridge" || netName == "host" || netName == "none" {
		return core.InternalProbeResult{}, fmt.Errorf("%s: %w: the container is on no app network (%q)", what, core.ErrInvalid, netName)
	}
	img, err := r.helperImage(ctx)
	if err != nil {
		return core.InternalProbeResult{}, fmt.Errorf("%s: helper image: %w", what, err)
	}
	req := HelperRequest{Type: p.Type, Address: fmt.Sprintf("%s:%d", name, p.Port), Path: p.Path, Host: p.Host, TimeoutMS: p.Timeout.Milliseconds()}
	body, _ := json.Marshal(req)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	labels := map[string]string{core.LabelManaged: "true", core.LabelRole: "probe-helper"}
	if c.Config != nil && c.Config.Labels[core.LabelApp] != "" {
		labels[core.LabelApp] = c.Config.Labels[core.LabelApp]
	}
	created, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       "gordon-probe-" + short(p.Container) + "-" + hex.EncodeToString(suffix),
		Config:     &container.Config{Image: img, Env: []string{EnvProbeHelper + "=" + string(body)}, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(netName), LogConfig: container.LogConfig{Type: "json-file"}},
	})
	if err != nil {
		return core.InternalProbeResult{}, r.classify(err, what+": create helper")
	}
	id := created.ID
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = r.cli.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true})
	}()
	if _, err := r.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return core.InternalProbeResult{}, r.classify(err, what+": start helper")
	}
	wctx, cancel := context.WithTimeout(ctx, p.Timeout+20*time.Second)
	defer cancel()
	for {
		st, err := r.cli.ContainerInspect(wctx, id, client.ContainerInspectOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return core.InternalProbeResult{}, ctx.Err()
			}
			return core.InternalProbeResult{}, r.classify(err, what+": wait for helper")
		}
		if st.Container.State != nil && !st.Container.State.Running && st.Container.State.Status != container.StateCreated {
			break
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return core.InternalProbeResult{}, ctx.Err()
			}
			return core.InternalProbeResult{}, fmt.Errorf("%s: %w: the helper did not finish within %s", what, core.ErrUnavailable, p.Timeout+20*time.Second)
		case <-time.After(100 * time.Millisecond):
		}
	}
	var last string
	_ = r.Logs(ctx, id, core.LogOptions{Tail: 20}, func(l core.LogLine) error {
		if l.Stream == "stdout" && strings.HasPrefix(strings.TrimSpace(l.Text), "{") {
			last = l.Text
		}
		return nil
	})
	var res HelperResult
	if last == "" || json.Unmarshal([]byte(last), &res) != nil {
		return core.InternalProbeResult{}, fmt.Errorf("%s: %w: the helper reported nothing (last line %q)", what, core.ErrUnavailable, last)
	}
	return core.InternalProbeResult{Ready: res.Ready, Attempts: res.Attempts, Detail: res.Detail}, nil
}

// helperImage builds (or finds) the probe helper image from this process's
// executable and returns its reference.
func (r *Runtime) helperImage(ctx context.Context) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("%w: locate own executable: %w", core.ErrInvalid, err)
	}
	img, err := image.Build(ctx, r.cli, "probe-helper", map[string]string{"/gordon-probe": exe},
		map[string]string{core.LabelManaged: "true", core.LabelRole: "probe-helper"})
	if err != nil {
		return "", err
	}
	return img.Ref, nil
}
