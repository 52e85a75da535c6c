package oprun

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// noteUnjournaled is the step detail of a step whose candidate was created
// but not yet journaled as its After when the op was interrupted.
const noteUnjournaled = "removed unjournaled candidate "

// textInterruptedUnjournaled is the error of a step the crash cut off
// between creating its candidate and journaling it (R17.1–R17.2); the
// candidate, found by the op label it carries, was removed.
const textInterruptedUnjournaled = "operation interrupted after its candidate was created and before it was journaled; the candidate was removed"

// removeUnjournaled converges the candidates a non-terminal op created but
// never journaled (SPEC R5.11, R47): a crash between the runtime's create
// and the journal save leaves a container labelled with the op's id that no
// step names. Every container labelled for the app and this op that ACTIVE
// does not name, no step records as After and no marker holds is
// force-removed (R24) and noted on its service's step. A container that is
// not confirmed gone, or a runtime that cannot list, fails closed (stuck):
// the op stays unfinalized. ACTIVE is loaded only when such a container
// exists; its load error is returned.
func (r *interruptedRun) removeUnjournaled(ctx context.Context) error {
	if r.terminal {
		return nil
	}
	cs, err := r.e.Runtime.ListManaged(ctx, map[string]string{core.LabelApp: r.app, core.LabelOp: r.op.ID})
	if err != nil {
		r.stuck = append(r.stuck, "list containers of the op: "+err.Error())
		return nil
	}
	journaled := map[string]bool{}
	for _, s := range r.op.Steps {
		journaled[s.After] = true
		journaled[s.Before] = true
	}
	for _, c := range cs {
		if c.ID == "" || journaled[c.ID] {
			continue
		}
		if r.published == nil {
			if err := r.loadPublished(ctx); err != nil {
				return err
			}
		}
		if r.published[c.ID] {
			continue
		}
		svc := c.Labels[core.LabelService]
		if reason, err := r.markerReason(ctx, svc, c.ID); err != nil || reason != "" {
			continue
		}
		res := r.e.Retire(ctx, r.app, c.ID, steps.RetireOptions{Service: svc, Force: true})
		if len(res.Warnings) > 0 {
			r.op.Warnings = reconcileWarnings(r.op.Warnings, res.Warnings)
		}
		r.changed = true
		if !res.Gone {
			detail := "container not confirmed gone"
			if len(res.Warnings) > 0 {
				detail = res.Warnings[0].Detail
			}
			r.stuck = append(r.stuck, fmt.Sprintf("%s (%s)", c.ID, detail))
			continue
		}
		for i := range r.op.Steps {
			st := &r.op.Steps[i]
			if st.Service == svc && st.After == "" && st.State != core.StepSucceeded {
				st.Detail = reconcileDetail(st.Detail, noteUnjournaled+c.ID)
				st.UpdatedAt = r.now
			}
		}
	}
	return nil
}

// rebuildableStep reports whether step id is a step that replaces or
// rebuilds its service's generation (deploy, start, restart), so a Before
// it removed leaves the service without a generation.
func rebuildableStep(id string) bool {
	return strings.HasSuffix(id, ".replace") || strings.HasSuffix(id, ".start") || strings.HasSuffix(id, ".restart")
}

// recordRebuilds is R47's rollback of an interrupted replacement: a
// not-succeeded replacement step of a non-terminal op whose Before is the
// container ACTIVE still names for its service, and which the runtime no
// longer has (the sequential flow removed it, R19.4, and no successor was
// published), leaves the service without a generation. The container is
// recorded in the recovery record's Rebuild set, so the periodic pass
// rebuilds it from ACTIVE's pinned revision (R41.3) instead of leaving the
// service down. An error (ACTIVE or the recovery record unreadable or
// unwritable) is returned so the op stays unfinalized and is retried.
func (r *interruptedRun) recordRebuilds(ctx context.Context) error {
	if r.terminal {
		return nil
	}
	var active core.Active
	loaded := false
	want := map[string]string{}
	for _, st := range r.op.Steps {
		if st.Service == "" || st.Before == "" || st.State == core.StepSucceeded || !rebuildableStep(st.ID) {
			continue
		}
		if !loaded {
			a, err := r.e.Store.LoadActive(ctx, r.app)
			if err != nil && !errors.Is(err, core.ErrNotFound) {
				return fmt.Errorf("load ACTIVE: %w", err)
			}
			active, loaded = a, true
		}
		as := active.Services[st.Service]
		if as == nil || as.Container != st.Before {
			continue
		}
		if _, err := r.e.Runtime.InspectContainer(ctx, st.Before); !errors.Is(err, core.ErrNotFound) {
			continue
		}
		want[st.Service] = st.Before
	}
	if len(want) == 0 {
		return nil
	}
	rec, err := r.e.Store.LoadRecovery(ctx, r.app)
	if err != nil {
		return fmt.Errorf("load recovery record: %w", err)
	}
	if rec.Rebuild == nil {
		rec.Rebuild = map[string]string{}
	}
	for svc, id := range want {
		rec.Rebuild[svc] = id
	}
	if err := r.e.Store.SaveRecovery(ctx, r.app, rec); err != nil {
		return fmt.Errorf("save recovery record: %w", err)
	}
	for i := range r.op.Steps {
		st := &r.op.Steps[i]
		if id, ok := want[st.Service]; ok && st.Before == id && rebuildableStep(st.ID) {
			st.Detail = reconcileDetail(st.Detail, "removed "+id+" without a published successor: reconcile rebuilds it")
			r.changed = true
		}
	}
	return nil
}
