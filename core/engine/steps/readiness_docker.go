package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"

	"github.com/gordon-deploy/docker-gordon/core"
)

// DefaultHealthPollInterval is how often docker readiness reads the
// container's health status.
const DefaultHealthPollInterval = 200 * time.Millisecond

// UnhealthyError is the failure of docker readiness when the container's
// health status became "unhealthy" (or the container stopped) before it
// was healthy. It wraps ErrUnavailable. HealthLog is the output of the last
// health check.
type UnhealthyError struct {
	App, Service, Container string
	// Status is "unhealthy", or the container status when it stopped.
	Status    string
	HealthLog string
}

func (e *UnhealthyError) Error() string {
	what := "became unhealthy"
	if e.Status != "unhealthy" {
		what = "stopped (" + e.Status + ") before it was healthy"
	}
	log := e.HealthLog
	if log == "" {
		log = "no health check output"
	}
	return fmt.Sprintf("docker readiness: app %s, service %s, container %s %s; last health check: %s",
		e.App, e.Service, readiness.ShortID(e.Container), what, log)
}

// Unwrap makes errors.Is(err, ErrUnavailable) hold.
func (e *UnhealthyError) Unwrap() error { return core.ErrUnavailable }

// waitHealthy is readiness type "docker": it reads the container's health
// status every HealthPollInterval (default 200 ms) until "healthy" (ready),
// "unhealthy" or a stopped container (*UnhealthyError at once), the budget
// r.Timeout (default 30 s) runs out (*ReadinessTimeoutError, type docker,
// with the last health output), or ctx ends (ctx's error). A container
// without a healthcheck fails at once (ErrInvalid).
func (e *Engine) waitHealthy(ctx context.Context, target core.ProbeTarget, r core.Readiness, progress func(readiness.WaitResult)) (readiness.WaitResult, error) {
	start := time.Now()
	budget := readiness.OrDefault(r.Timeout.D(), readiness.DefaultReadinessTimeout)
	interval := readiness.OrDefault(e.HealthPollInterval, DefaultHealthPollInterval)
	bctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var res readiness.WaitResult
	for {
		st, err := e.Runtime.InspectContainer(bctx, target.ContainerID)
		res.Attempts++
		res.Elapsed = time.Since(start)
		switch {
		case ctx.Err() != nil:
			return res, ctx.Err()
		case err != nil && bctx.Err() == nil:
			return res, fmt.Errorf("docker readiness: inspect %s: %w", readiness.ShortID(target.ContainerID), err)
		case err == nil:
			res.LastDetail = "health " + st.Health
			if st.HealthLog != "" {
				res.LastDetail += ": " + st.HealthLog
			}
			switch {
			case st.Health == "healthy" && st.Running():
				return res, nil
			case st.Health == "unhealthy":
				return res, &UnhealthyError{App: target.App, Service: target.Service, Container: target.ContainerID, Status: "unhealthy", HealthLog: st.HealthLog}
			case !st.Running() && st.Status != core.StatusRestarting:
				return res, &UnhealthyError{App: target.App, Service: target.Service, Container: target.ContainerID, Status: st.Status, HealthLog: st.HealthLog}
			case st.Health == "" && !st.HasHealthcheck:
				return res, fmt.Errorf("%w: docker readiness: container %s has no healthcheck: declare [services.%s.healthcheck] or choose another readiness type",
					core.ErrInvalid, readiness.ShortID(target.ContainerID), target.Service)
			}
		}
		if progress != nil {
			progress(res)
		}
		t := time.NewTimer(interval)
		select {
		case <-bctx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, &readiness.ReadinessTimeoutError{App: target.App, Service: target.Service, Container: target.ContainerID,
				Type: core.ReadinessDocker, Budget: budget, Attempts: res.Attempts, LastDetail: res.LastDetail}
		case <-t.C:
		}
	}
}

// WaitReady runs readiness r on target: type docker reads the engine's
// health status (waitHealthy); every other type goes through e.Readiness.
func (e *Engine) WaitReady(ctx context.Context, target core.ProbeTarget, r core.Readiness, progress func(readiness.WaitResult)) (readiness.WaitResult, error) {
	return e.waitReady(ctx, e.Readiness, target, r, progress)
}

// waitReady is WaitReady with w's cadence for the probes it runs.
func (e *Engine) waitReady(ctx context.Context, w *readiness.ReadinessWaiter, target core.ProbeTarget, r core.Readiness, progress func(readiness.WaitResult)) (readiness.WaitResult, error) {
	if r.Type == core.ReadinessDocker {
		return e.waitHealthy(ctx, target, r, progress)
	}
	if target.Internal {
		return e.waitInternal(ctx, target, r)
	}
	if w == nil {
		return readiness.WaitResult{}, fmt.Errorf("%w: no readiness backend for %s readiness", core.ErrUnavailable, r.Type)
	}
	return w.Wait(ctx, target, r, progress)
}

// IsUnhealthy reports whether err is docker readiness's unhealthy verdict.
func IsUnhealthy(err error) bool {
	var u *UnhealthyError
	return errors.As(err, &u)
}

// waitInternal runs readiness r of an internal-only port through the
// runtime's helper (R30, InternalProber) under r's budget.
func (e *Engine) waitInternal(ctx context.Context, target core.ProbeTarget, r core.Readiness) (readiness.WaitResult, error) {
	start := time.Now()
	budget := readiness.OrDefault(r.Timeout.D(), readiness.DefaultReadinessTimeout)
	ip, ok := e.Runtime.(core.InternalProber)
	if !ok {
		return readiness.WaitResult{}, fmt.Errorf("%w: app %s service %s: readiness port %d/tcp is internal only and the runtime cannot probe internal ports",
			core.ErrUnavailable, target.App, target.Service, target.Port)
	}
	res, err := ip.ProbeInternal(ctx, core.InternalProbe{Container: target.ContainerID, Type: r.Type, Port: target.Port, Path: r.Path, Host: target.Host, Timeout: budget})
	w := readiness.WaitResult{Attempts: res.Attempts, LastDetail: res.Detail, Elapsed: time.Since(start)}
	switch {
	case ctx.Err() != nil:
		return w, ctx.Err()
	case err != nil:
		return w, fmt.Errorf("app %s service %s container %s: internal %s readiness: %w", target.App, target.Service, readiness.ShortID(target.ContainerID), r.Type, err)
	case !res.Ready:
		return w, &readiness.ReadinessTimeoutError{App: target.App, Service: target.Service, Container: target.ContainerID,
			Type: r.Type, Budget: budget, Address: fmt.Sprintf("internal port %d", target.Port), URL: fmt.Sprintf("http://<container>:%d%s", target.Port, r.Path),
			Attempts: res.Attempts, LastDetail: res.Detail}
	}
	return w, nil
}

// ProbeRunning runs readiness r (declared or deploy-time) on a running
// container's fresh binds; type none succeeds at once.
func (e *Engine) ProbeRunning(ctx context.Context, app, name string, spec *core.ServiceSpec, rd core.Readiness, id string, startedAt time.Time, ep Endpoints) error {
	return e.ProbeRunningEvery(ctx, 0, app, name, spec, rd, id, startedAt, ep)
}

// ProbeRunningEvery is ProbeRunning with HTTP, TCP and plugin attempts
// every apart (0: their SPEC intervals, R31, R33): a wake's probe (R81),
// which a held request waits on.
func (e *Engine) ProbeRunningEvery(ctx context.Context, every time.Duration, app, name string, spec *core.ServiceSpec, rd core.Readiness, id string, startedAt time.Time, ep Endpoints) error {
	if rd.Type == "" || rd.Type == core.ReadinessNone {
		return nil
	}
	target, err := readiness.ProbeTargetFor(app, spec, rd, id, startedAt, ep.Binds())
	if err != nil {
		return err
	}
	target.App, target.Service = app, name
	e.Emit(ProgressEvent{App: app, Service: name, Phase: PhaseProbe, Detail: target.Address})
	w := e.Readiness
	if every > 0 {
		w = w.Every(every)
	}
	if _, err := e.waitReady(ctx, w, target, rd, nil); err != nil {
		return fmt.Errorf("readiness of %s: %w", id, err)
	}
	return nil
}
