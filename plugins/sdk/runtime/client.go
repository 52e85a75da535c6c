package runtime

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// RuntimeClient implements core.Runtime over gRPC (STYLE "What we take" 2):
// the engine cannot tell it from an in-process runtime. Errors keep their
// core class (errors.Is(err, core.ErrNotFound) holds); a dead plugin
// process surfaces as core.ErrPluginExited naming the plugin.
type RuntimeClient struct {
	rpc    pb.RuntimeClient
	origin wire.Origin
}

var _ core.Runtime = (*RuntimeClient)(nil)

// NewClient returns the client over conn; origin names the plugin in errors.
func NewClient(conn grpc.ClientConnInterface, origin wire.Origin) *RuntimeClient {
	return &RuntimeClient{rpc: pb.NewRuntimeClient(conn), origin: origin}
}

func (c *RuntimeClient) err(ctx context.Context, op string, err error) error {
	return wire.FromGRPC(ctx, c.origin, op, err)
}

// PluginInfo calls the Describe RPC: the plugin's kind, name, protocol
// version, version and PID.
func (c *RuntimeClient) PluginInfo(ctx context.Context) (wire.Info, error) {
	r, err := c.rpc.Describe(ctx, &pb.DescribeRequest{})
	if err != nil {
		return wire.Info{}, c.err(ctx, "describe", err)
	}
	return wire.InfoFromProto(r.GetInfo()), nil
}

func (c *RuntimeClient) Info(ctx context.Context) (core.RuntimeInfo, error) {
	r, err := c.rpc.Info(ctx, &pb.Empty{})
	if err != nil {
		return core.RuntimeInfo{}, c.err(ctx, "info", err)
	}
	return infoFromProto(r), nil
}

func (c *RuntimeClient) ResolveImage(ctx context.Context, ref string) (core.ImageRef, error) {
	r, err := c.rpc.ResolveImage(ctx, &pb.ResolveImageRequest{Ref: ref})
	if err != nil {
		return core.ImageRef{}, c.err(ctx, "resolve image", err)
	}
	return imageFromProto(r), nil
}

func (c *RuntimeClient) PullImage(ctx context.Context, ref string) error {
	_, err := c.rpc.PullImage(ctx, &pb.PullImageRequest{Ref: ref})
	return c.err(ctx, "pull image", err)
}

func (c *RuntimeClient) EnsureNetwork(ctx context.Context, n core.NetworkSpec) (string, error) {
	r, err := c.rpc.EnsureNetwork(ctx, networkToProto(n))
	if err != nil {
		return "", c.err(ctx, "ensure network", err)
	}
	return r.GetId(), nil
}

func (c *RuntimeClient) EnsureVolume(ctx context.Context, v core.VolumeSpec) error {
	_, err := c.rpc.EnsureVolume(ctx, volumeToProto(v))
	return c.err(ctx, "ensure volume", err)
}

func (c *RuntimeClient) CreateContainer(ctx context.Context, s core.ContainerSpec) (string, error) {
	r, err := c.rpc.CreateContainer(ctx, containerSpecToProto(s))
	if err != nil {
		return "", c.err(ctx, "create container", err)
	}
	return r.GetId(), nil
}

func (c *RuntimeClient) StartContainer(ctx context.Context, id string) error {
	_, err := c.rpc.StartContainer(ctx, &pb.ContainerRequest{Id: id})
	return c.err(ctx, "start container", err)
}

func (c *RuntimeClient) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	_, err := c.rpc.StopContainer(ctx, &pb.StopContainerRequest{Id: id, Grace: wire.DurationToProto(grace)})
	return c.err(ctx, "stop container", err)
}

func (c *RuntimeClient) RemoveContainer(ctx context.Context, id string, force bool) error {
	_, err := c.rpc.RemoveContainer(ctx, &pb.RemoveContainerRequest{Id: id, Force: force})
	return c.err(ctx, "remove container", err)
}

func (c *RuntimeClient) RestartContainer(ctx context.Context, id string, grace time.Duration) error {
	_, err := c.rpc.RestartContainer(ctx, &pb.StopContainerRequest{Id: id, Grace: wire.DurationToProto(grace)})
	return c.err(ctx, "restart container", err)
}

func (c *RuntimeClient) InspectContainer(ctx context.Context, id string) (core.ContainerState, error) {
	r, err := c.rpc.InspectContainer(ctx, &pb.ContainerRequest{Id: id})
	if err != nil {
		return core.ContainerState{}, c.err(ctx, "inspect container", err)
	}
	return stateFromProto(r), nil
}

func (c *RuntimeClient) BackendBinds(ctx context.Context, id string, ports []core.PortSpec) ([]core.BackendBind, error) {
	r, err := c.rpc.BackendBinds(ctx, &pb.BackendBindsRequest{Id: id, Ports: portsToProto(ports)})
	if err != nil {
		return nil, c.err(ctx, "backend binds", err)
	}
	return bindsFromProto(r.GetBinds()), nil
}

// Logs streams lines to fn. An error returned by fn ends the stream and is
// returned as is.
func (c *RuntimeClient) Logs(ctx context.Context, id string, opts core.LogOptions, fn func(core.LogLine) error) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.Logs(sctx, logOptionsToProto(id, opts))
	if err != nil {
		return c.err(ctx, "logs", err)
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.err(ctx, "logs", err)
		}
		if ferr := fn(lineFromProto(m)); ferr != nil {
			return ferr
		}
	}
}

func (c *RuntimeClient) ListManaged(ctx context.Context, labels map[string]string) ([]core.ContainerState, error) {
	r, err := c.rpc.ListManaged(ctx, &pb.ListManagedRequest{Labels: labels})
	if err != nil {
		return nil, c.err(ctx, "list managed", err)
	}
	var out []core.ContainerState
	for _, s := range r.GetContainers() {
		out = append(out, stateFromProto(s))
	}
	return out, nil
}

// ProbeInternal implements core.InternalProber over the wire; a plugin
// that does not implement it answers Unimplemented (an error here).
func (c *RuntimeClient) ProbeInternal(ctx context.Context, p core.InternalProbe) (core.InternalProbeResult, error) {
	r, err := c.rpc.ProbeInternal(ctx, &pb.InternalProbeRequest{
		Container: p.Container, Type: p.Type, Port: int32(p.Port), Path: p.Path, Host: p.Host, Timeout: wire.DurationToProto(p.Timeout),
	})
	if err != nil {
		return core.InternalProbeResult{}, c.err(ctx, "probe internal", err)
	}
	return core.InternalProbeResult{Ready: r.GetReady(), Attempts: int(r.GetAttempts()), Detail: r.GetDetail()}, nil
}
