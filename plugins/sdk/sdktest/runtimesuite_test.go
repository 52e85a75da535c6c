package sdktest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

// emptyRuntime is a runtime with no containers: every exact-ID method
// reports not found (SPEC 1.3). It exercises RuntimeSuite's contract part;
// the lifecycle part runs against runtime/docker in plugins/builtin_test.go.
type emptyRuntime struct{}

func notFound(id string) error { return fmt.Errorf("container %s: %w", id, core.ErrNotFound) }

func (emptyRuntime) Info(context.Context) (core.RuntimeInfo, error) {
	return core.RuntimeInfo{Name: "empty"}, nil
}
func (emptyRuntime) ResolveImage(_ context.Context, ref string) (core.ImageRef, error) {
	return core.ImageRef{}, fmt.Errorf("image %s: %w", ref, core.ErrNotFound)
}
func (emptyRuntime) PullImage(context.Context, string) error { return core.ErrUnavailable }
func (emptyRuntime) EnsureNetwork(context.Context, core.NetworkSpec) (string, error) {
	return "n", nil
}
func (emptyRuntime) EnsureVolume(context.Context, core.VolumeSpec) error { return nil }
func (emptyRuntime) CreateContainer(context.Context, core.ContainerSpec) (string, error) {
	return "", core.ErrInvalid
}
func (emptyRuntime) StartContainer(_ context.Context, id string) error { return notFound(id) }
func (emptyRuntime) StopContainer(_ context.Context, id string, _ time.Duration) error {
	return notFound(id)
}
func (emptyRuntime) RemoveContainer(_ context.Context, id string, _ bool) error { return notFound(id) }
func (emptyRuntime) RestartContainer(_ context.Context, id string, _ time.Duration) error {
	return notFound(id)
}
func (emptyRuntime) InspectContainer(_ context.Context, id string) (core.ContainerState, error) {
	return core.ContainerState{}, notFound(id)
}
func (emptyRuntime) BackendBinds(_ context.Context, id string, _ []core.PortSpec) ([]core.BackendBind, error) {
	return nil, notFound(id)
}
func (emptyRuntime) Logs(_ context.Context, id string, _ core.LogOptions, _ func(core.LogLine) error) error {
	return notFound(id)
}
func (emptyRuntime) ListManaged(context.Context, map[string]string) ([]core.ContainerState, error) {
	return nil, nil
}

func TestRuntimeSuite_InProcess(t *testing.T) {
	sdktest.RuntimeSuite(t, func(*testing.T) (core.Runtime, sdktest.ImageForTests) {
		return emptyRuntime{}, sdktest.ImageForTests{}
	})
}

func TestRuntimeSuite_ThroughTheWire(t *testing.T) {
	sdktest.RuntimeSuite(t, func(t *testing.T) (core.Runtime, sdktest.ImageForTests) {
		return sdktest.ServeRuntime(t, emptyRuntime{}), sdktest.ImageForTests{}
	})
}
