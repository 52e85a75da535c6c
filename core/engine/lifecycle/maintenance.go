package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/access"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// OpMaintenance is the kind of the op that turns an app's maintenance
// mode on or off (R75).
const OpMaintenance = "maintenance"

// StepIntentMaintenance is the journal step of a maintenance op that
// saves the app's maintenance record (R75).
const StepIntentMaintenance = "intent.maintenance"

// MaintenanceRequest turns an app's maintenance mode on or off (SPEC R75).
type MaintenanceRequest struct {
	// App is the app name (required).
	App string
	// On sets the maintenance record; false clears it.
	On bool
	// Message is the text the edge answers with (plain text, at most
	// access.MaxMaintenanceMessage bytes of UTF-8; "": the edge's
	// default). Only with On.
	Message string
	// Allow are CIDRs or IPs whose clients are proxied normally. Only
	// with On.
	Allow []string
	// OpKey is the caller's idempotency key (R6); "" generates an op id.
	OpKey string
}

// Maintenance turns req.App's maintenance mode on or off (SPEC R75):
// after the edge liveness check and the lifecycle preamble (R49: app
// known, app lock, store self-recovery, interrupted-op reconciliation)
// it claims an op of kind "maintenance" with step intent.maintenance,
// saves the intent with the maintenance record set (Message, Allow
// masked) or cleared; the step's Detail is "on" or "off", then rebuilds traffic once
// (every HTTP route of the app carries it, BuildGraph's routes plus
// WithMaintenance); a rejected rebuild is R11 with a failed
// traffic.publish step. Containers, readiness and ACTIVE are untouched.
//
// Errors: empty app, a message too long or not UTF-8, a bad allow entry,
// or a message or allow with On=false → ErrInvalid (nothing changed);
// unknown app → ErrNotFound; lock, R7 and R8 refusals → ErrConflict; a
// stopped edge → ErrUnavailable. The result is non-nil whenever an op
// was claimed or replayed.
func (e *Engine) Maintenance(ctx context.Context, req MaintenanceRequest) (*oprun.OpResult, error) {
	m, err := maintenanceRecord(req)
	if err != nil {
		return nil, err
	}
	if err := e.RequireLiveTraffic(ctx, OpMaintenance); err != nil {
		return nil, err
	}
	parts := []string{req.App, fmt.Sprint(req.On)}
	if m != nil {
		parts = append(parts, m.Message, strings.Join(m.Allow, ","))
	}
	fp := steps.Fingerprint(OpMaintenance, parts...)
	lreq := oprun.LifecycleRequest{App: req.App, OpKey: req.OpKey}
	lk, res, ok, err := e.LifecyclePreamble(ctx, OpMaintenance, lreq, fp)
	if !ok {
		return res, err
	}
	defer lk.Unlock()
	r, replay, err := e.ClaimLifecycle(ctx, OpMaintenance, lreq, fp, []core.Step{{ID: StepIntentMaintenance, State: core.StepPending}})
	if r == nil {
		return replay, err
	}
	r.Checks = lk.Checks
	in, err := e.Store.LoadIntent(ctx, req.App)
	if err != nil {
		err = fmt.Errorf("maintenance %s: load intent: %w", req.App, err)
		r.Fail(ctx, steps.StepError, err)
		return r.Result(), err
	}
	in.Maintenance, in.UpdatedBy, in.UpdatedAt = m, r.Op.ID, e.Now()
	if err := e.Store.SaveIntent(ctx, req.App, in); err != nil {
		err = fmt.Errorf("maintenance %s: save intent: %w", req.App, err)
		r.Fail(ctx, steps.StepError, err)
		return r.Result(), err
	}
	detail := "off"
	if m != nil {
		detail = "on"
	}
	r.Op.Steps[0].Detail = detail
	r.SetStep(0, core.StepSucceeded, "")
	r.Finalize()
	r.Save(ctx)
	if err := e.Rebuild(ctx); err != nil {
		err = fmt.Errorf("maintenance %s: %w", req.App, err)
		r.Fail(ctx, steps.StepTrafficPublish, err)
		return r.Result(), err
	}
	return r.Result(), nil
}

// maintenanceRecord validates req and returns the record to save (nil
// for off). Allow entries are masked (access.ParseAllow).
func maintenanceRecord(req MaintenanceRequest) (*routetable.Maintenance, error) {
	if req.App == "" {
		return nil, fmt.Errorf("%w: maintenance: no app given", core.ErrInvalid)
	}
	if !req.On {
		if req.Message != "" || len(req.Allow) > 0 {
			return nil, fmt.Errorf("%w: maintenance off %s: --message and --allow go with \"maintenance on\"", core.ErrInvalid, req.App)
		}
		return nil, nil
	}
	if len(req.Message) > access.MaxMaintenanceMessage || !utf8.ValidString(req.Message) {
		return nil, fmt.Errorf("%w: maintenance on %s: the message must be UTF-8 text of at most %d bytes", core.ErrInvalid, req.App, access.MaxMaintenanceMessage)
	}
	m := &routetable.Maintenance{Message: req.Message}
	for _, a := range req.Allow {
		p, err := access.ParseAllow(a)
		if err != nil {
			return nil, fmt.Errorf("%w: maintenance on %s: --allow: %v", core.ErrInvalid, req.App, err)
		}
		m.Allow = append(m.Allow, p.String())
	}
	return m, nil
}

// MaintenanceInfo is an app's maintenance mode as `maintenance status`
// shows it (SPEC R75).
type MaintenanceInfo struct {
	App string `json:"app"`
	// On says the app is in maintenance; Message ("": the edge's
	// default) and Allow are its record.
	On      bool     `json:"on"`
	Message string   `json:"message,omitempty"`
	Allow   []string `json:"allow,omitempty"`
	// Since and Op are the start and id of the op that turned it on
	// (zero and "" when that op is no longer in the journal).
	Since time.Time `json:"since,omitzero"`
	Op    string    `json:"op,omitempty"`
}

// MaintenanceStatus reads app's maintenance mode from its intent and
// journal. Errors: unknown app → ErrNotFound; unreadable records.
func (e *Engine) MaintenanceStatus(ctx context.Context, app string) (MaintenanceInfo, error) {
	out := MaintenanceInfo{App: app}
	if _, err := e.Store.LoadApp(ctx, app); err != nil {
		return out, fmt.Errorf("maintenance status %s: %w", app, err)
	}
	in, err := e.Store.LoadIntent(ctx, app)
	if err != nil || in.Maintenance == nil {
		return out, err
	}
	out.On, out.Message, out.Allow = true, in.Maintenance.Message, in.Maintenance.Allow
	ops, err := e.Store.ListOps(ctx, app)
	if err != nil {
		return out, nil // the record decides; the journal only dates it
	}
	for _, op := range ops {
		if st := op.Step(StepIntentMaintenance); op.Kind == OpMaintenance && st != nil && st.State == core.StepSucceeded && st.Detail == "on" &&
			(out.Op == "" || op.StartedAt.After(out.Since)) {
			out.Since, out.Op = op.StartedAt, op.ID
		}
	}
	return out, nil
}
