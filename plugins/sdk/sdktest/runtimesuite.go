package sdktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gordon-deploy/docker-gordon/core"
)

// ImageForTests describes a local image RuntimeSuite can run. The zero
// value skips the container lifecycle tests (only the contract tests run).
type ImageForTests struct {
	// Ref is a local image reference (no registry is contacted).
	Ref string
	// Command optionally replaces the entrypoint.
	Command []string
	// Env is passed to the container ("KEY=value").
	Env []string
	// Port is a TCP container port the workload listens on.
	Port int
	// LogMarker is a substring the workload writes to stdout or stderr
	// once started.
	LogMarker string
}

// RuntimeSuite checks the core.Runtime contract (core/runtime.go, SPEC
// 1.3, ARCHITECTURE §4) against the runtimes newRuntime returns: exact-ID
// methods on an unknown container wrap core.ErrNotFound; a missing image
// resolves to ErrNotFound (only with an image: fakes resolve anything);
// and, with an image, one full lifecycle (ensure
// network twice, create, start, inspect, backend binds on 127.0.0.1, logs,
// list by label, stop twice, remove, inspect after remove). Containers are
// labelled dev.gordon.test=<uuid> and removed at the end of the test.
func RuntimeSuite(t *testing.T, newRuntime func(t *testing.T) (core.Runtime, ImageForTests)) {
	t.Run("Spec1_3_UnknownContainerIsNotFound", func(t *testing.T) {
		rt, _ := newRuntime(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		id := "0000000000000000000000000000000000000000000000000000000000000000"
		_, err := rt.InspectContainer(ctx, id)
		assertIs(t, "InspectContainer", err, core.ErrNotFound)
		assertIs(t, "StartContainer", rt.StartContainer(ctx, id), core.ErrNotFound)
		assertIs(t, "StopContainer", rt.StopContainer(ctx, id, time.Second), core.ErrNotFound)
		assertIs(t, "RestartContainer", rt.RestartContainer(ctx, id, time.Second), core.ErrNotFound)
		assertIs(t, "RemoveContainer", rt.RemoveContainer(ctx, id, true), core.ErrNotFound)
		_, err = rt.BackendBinds(ctx, id, []core.PortSpec{{Port: 80, Protocol: "tcp"}})
		assertIs(t, "BackendBinds", err, core.ErrNotFound)
		err = rt.Logs(ctx, id, core.LogOptions{}, func(core.LogLine) error { return nil })
		assertIs(t, "Logs", err, core.ErrNotFound)
	})
	t.Run("Decision15_MissingImageIsNotFound", func(t *testing.T) {
		rt, img := newRuntime(t)
		if img.Ref == "" {
			t.Skip("no test image: the runtime has no real image store")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := rt.ResolveImage(ctx, "gordon-sdktest/absent:"+uuid.NewString()[:8])
		assertIs(t, "ResolveImage", err, core.ErrNotFound)
	})
	t.Run("Info", func(t *testing.T) {
		rt, _ := newRuntime(t)
		info, err := rt.Info(context.Background())
		if err != nil {
			t.Fatalf("Info: %v", err)
		}
		if info.Name == "" {
			t.Fatalf("Info: empty name in %+v", info)
		}
	})
	t.Run("ListByUnknownLabelIsEmpty", func(t *testing.T) {
		rt, _ := newRuntime(t)
		cs, err := rt.ListManaged(context.Background(), map[string]string{"dev.gordon.test": uuid.NewString()})
		if err != nil {
			t.Fatalf("ListManaged: %v", err)
		}
		if len(cs) != 0 {
			t.Fatalf("ListManaged by a fresh label: %d containers, want 0", len(cs))
		}
	})
	t.Run("Arch4_ContainerLifecycle", func(t *testing.T) {
		rt, img := newRuntime(t)
		if img.Ref == "" {
			t.Skip("no test image")
		}
		runtimeLifecycle(t, rt, img)
	})
}

func runtimeLifecycle(t *testing.T, rt core.Runtime, img ImageForTests) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := uuid.NewString()
	labels := map[string]string{core.LabelManaged: "true", "dev.gordon.test": run}

	ref, err := rt.ResolveImage(ctx, img.Ref)
	if err != nil {
		t.Fatalf("ResolveImage(%q): %v", img.Ref, err)
	}
	if ref.Ref == "" || ref.ID == "" {
		t.Fatalf("ResolveImage(%q): incomplete %+v", img.Ref, ref)
	}

	const netName = "gordon-sdktest"
	n1, err := rt.EnsureNetwork(ctx, core.NetworkSpec{Name: netName, Labels: map[string]string{core.LabelManaged: "true"}})
	if err != nil {
		t.Fatalf("EnsureNetwork: %v", err)
	}
	n2, err := rt.EnsureNetwork(ctx, core.NetworkSpec{Name: netName, Labels: map[string]string{core.LabelManaged: "true"}})
	if err != nil || n1 == "" || n1 != n2 {
		t.Fatalf("EnsureNetwork twice: %q, %q, %v: want the same non-empty ID", n1, n2, err)
	}

	id, err := rt.CreateContainer(ctx, core.ContainerSpec{
		Name: "gordon-sdktest-" + run[:8], Image: ref.Ref, Command: img.Command, Env: img.Env,
		Labels: labels, Network: netName, Aliases: []string{"web"},
		Ports: []core.PortSpec{{Port: img.Port, Protocol: "tcp"}}, StopGrace: 2 * time.Second,
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id, true) })

	st, err := rt.InspectContainer(ctx, id)
	if err != nil || st.ID != id || st.Status != core.StatusCreated {
		t.Fatalf("Inspect after create: %+v, %v: want %s created", st, err, id)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	st, err = rt.InspectContainer(ctx, id)
	if err != nil || !st.Running() || st.StartedAt.IsZero() {
		t.Fatalf("Inspect after start: %+v, %v: want running with a start time", st, err)
	}
	if st.Labels["dev.gordon.test"] != run {
		t.Fatalf("Inspect: labels %v lack dev.gordon.test=%s", st.Labels, run)
	}

	binds, err := rt.BackendBinds(ctx, id, []core.PortSpec{{Port: img.Port, Protocol: "tcp"}})
	if err != nil || len(binds) != 1 || binds[0].ContainerPort != img.Port || binds[0].HostPort == 0 || binds[0].Protocol != "tcp" {
		t.Fatalf("BackendBinds: %+v, %v: want one tcp bind of %d", binds, err, img.Port)
	}

	if img.LogMarker != "" {
		checkRuntimeLogs(ctx, t, rt, id, img.LogMarker)
	}

	cs, err := rt.ListManaged(ctx, labels)
	if err != nil || len(cs) != 1 || cs[0].ID != id {
		t.Fatalf("ListManaged(%v): %+v, %v: want exactly %s", labels, cs, err, id)
	}

	if err := rt.StopContainer(ctx, id, 2*time.Second); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if err := rt.StopContainer(ctx, id, 2*time.Second); err != nil {
		t.Fatalf("StopContainer of a stopped container: %v, want success", err)
	}
	st, err = rt.InspectContainer(ctx, id)
	if err != nil || st.Running() {
		t.Fatalf("Inspect after stop: %+v, %v: want not running", st, err)
	}
	if err := rt.RemoveContainer(ctx, id, false); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	_, err = rt.InspectContainer(ctx, id)
	assertIs(t, "InspectContainer after remove", err, core.ErrNotFound)
}

// checkRuntimeLogs: Logs delivers the container's output (marker within
// 20 s), and a callback error ends Logs and is returned as is.
func checkRuntimeLogs(ctx context.Context, t *testing.T, rt core.Runtime, id, marker string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		found := false
		err := rt.Logs(ctx, id, core.LogOptions{}, func(l core.LogLine) error {
			if strings.Contains(l.Text, marker) {
				found = true
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Logs: %v", err)
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Logs: %q not seen within 20s", marker)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A callback error ends Logs and is returned as is.
	stop := errors.New("stop")
	if err := rt.Logs(ctx, id, core.LogOptions{Follow: true}, func(core.LogLine) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Logs with a failing callback: %v, want the callback's error", err)
	}
}

func assertIs(t *testing.T, what string, err, class error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Errorf("%s: err = %v, want one wrapping %v", what, err, class)
	}
}
