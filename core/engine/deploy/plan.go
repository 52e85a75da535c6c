package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/depgraph"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/readycheck"
)

// Action is what a plan decides for one service (R14.2, R56); it marshals
// as its string.
type Action string

// Plan actions (R14.2, R56).
const (
	ActionUnchanged  Action = "unchanged"
	ActionOverlap    Action = "overlap"
	ActionSequential Action = "sequential"
	ActionRemove     Action = "remove"
	// ActionRunOnce: a one-shot service runs to completion (ServiceSpec.Run).
	ActionRunOnce Action = "run-once"
	// ActionScale: only the instance count changes; the serving generation
	// gains or loses instances (R69).
	ActionScale Action = "scale"
)

// Plan is what a deploy will do, computed by the pure function BuildPlan
// from the revision, ACTIVE and the observed runtime state (STYLE "What we
// take" 7). The engine executes it; `deploy --dry-run` prints String().
type Plan struct {
	App      string `json:"app"`
	Revision string `json:"revision"`
	// Targeted is true for a --service deploy (no dropped-service removal).
	Targeted bool `json:"targeted,omitempty"`
	// Services are the pinned services in dependency order (R20: after the
	// services they depend on, ties in ascending name order).
	Services []PlannedService `json:"services"`
	// Drops are ACTIVE services the revision no longer declares (R56), in
	// ascending name order; empty for a targeted deploy.
	Drops []PlannedService `json:"drops,omitempty"`
	// Warnings are what the deploy would meet at preflight that a plan
	// does not stop at: an image not on the engine (pulled, or refused
	// with --pull=never), a secret not set (refused). One line each, in
	// service order.
	Warnings []string `json:"warnings,omitempty"`
}

// PlannedService is the decision for one service.
type PlannedService struct {
	Service string `json:"service"`
	// Action is unchanged, overlap, sequential or remove.
	Action Action `json:"action"`
	// Reason says why the flow was chosen (e.g. "single-writer: volume data").
	Reason string `json:"reason"`
	// Change says why the service is not unchanged ("" when unchanged or
	// on a first deployment), e.g. "image digest changed".
	Change string `json:"change,omitempty"`
	// Before is the container ACTIVE names now ("" on first deployment).
	Before string `json:"before,omitempty"`
	// Image is the resolved image of the new generation (zero for removals).
	Image core.ImageRef `json:"image"`
	// Readiness is the check a new container of the service passes before
	// anything is routed to it, and where it comes from (R29); absent for
	// removals and one-shots.
	Readiness *readycheck.Check `json:"readiness,omitempty"`
}

// Service returns the planned decision for name, or nil.
func (p *Plan) Service(name string) *PlannedService {
	for i := range p.Services {
		if p.Services[i].Service == name {
			return &p.Services[i]
		}
	}
	return nil
}

// String renders one line per service: "<service>: <action> (<reason>)",
// followed by ", changed: <change>" when the service is not unchanged for
// a reason other than a first deployment. Drops come last.
func (p Plan) String() string {
	var b strings.Builder
	scope := "full"
	if p.Targeted {
		scope = "targeted"
	}
	fmt.Fprintf(&b, "app %s, revision %s (%s deploy):\n", p.App, p.Revision, scope)
	line := func(s PlannedService) {
		action := string(s.Action)
		if s.Action == ActionSequential && s.Before == "" {
			// Nothing serves it yet: it is started, not replaced.
			action = "new"
		}
		fmt.Fprintf(&b, "  %s: %s (%s)", s.Service, action, s.Reason)
		if s.Change != "" {
			fmt.Fprintf(&b, ", changed: %s", s.Change)
		}
		b.WriteString("\n")
		if s.Readiness != nil && s.Action != ActionUnchanged {
			fmt.Fprintf(&b, "    readiness: %s\n", s.Readiness)
		}
	}
	for _, s := range p.Services {
		line(s)
	}
	for _, s := range p.Drops {
		line(s)
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}

// PlanInput is the full input of the planner. BuildPlan fills the common
// part; the engine also supplies the fields that need the store.
type PlanInput struct {
	Revision core.Revision
	Active   core.Active
	// Observed maps container ID → inspected state (absent = not found).
	Observed map[string]core.ContainerState
	// PendingWithdrawals is the set of services with a pending withdrawal.
	PendingWithdrawals map[string]bool
	Markers            []core.Marker
	// Resolved maps service → resolved image (preflight).
	Resolved map[string]core.ImageRef
	// Services restricts the plan to these services (targeted deploy).
	Services []string
	// EffectiveEnv maps revision id → that revision's app env (R15: the
	// effective revision's app env must equal the new one). A revision
	// absent from the map is treated as different unless it is Revision.
	EffectiveEnv map[string]map[string]string
	// DesiredEnv maps service → the "KEY=value" entries the new generation
	// would receive (app env + service env + env secrets, S28). When absent
	// for a service, app env + service env are used.
	DesiredEnv map[string][]string
	Restore    map[string]string // service → snapshot restored: replaced sequentially even if unchanged
}

// BuildPlan is the pure planner of SPEC R14.2, R15, R16 and R56 for a full
// deploy. observed is keyed by container ID; resolved by service name.
// It never fails: a service whose image is not resolved plans as changed.
func BuildPlan(rev core.Revision, active core.Active, observed map[string]core.ContainerState, pendingWithdrawals map[string]bool, markers []core.Marker, resolved map[string]core.ImageRef) Plan {
	return PlanInput{Revision: rev, Active: active, Observed: observed, PendingWithdrawals: pendingWithdrawals, Markers: markers, Resolved: resolved}.Build()
}

// Build computes the plan (see BuildPlan).
func (in PlanInput) Build() Plan {
	p := Plan{App: in.Revision.App, Revision: in.Revision.ID, Targeted: len(in.Services) > 0}
	if p.App == "" {
		p.App = in.Revision.Spec.Name
	}
	want := map[string]bool{}
	for _, s := range in.Services {
		want[s] = true
	}
	for i := range in.Revision.Spec.Services {
		s := &in.Revision.Spec.Services[i]
		if p.Targeted && !want[s.Name] {
			continue
		}
		p.Services = append(p.Services, in.planService(s))
	}
	// R20: dependency order (depends_on), ties by name.
	rank := map[string]int{}
	for i, n := range depgraph.DependencyOrder(in.Revision.Spec.Services) {
		rank[n] = i
	}
	sort.SliceStable(p.Services, func(i, j int) bool { return rank[p.Services[i].Service] < rank[p.Services[j].Service] })
	if !p.Targeted {
		for _, name := range slices.Sorted(maps.Keys(in.Active.Services)) {
			if _, ok := in.Revision.Spec.Service(name); ok {
				continue
			}
			p.Drops = append(p.Drops, PlannedService{Service: name, Action: ActionRemove, Reason: "no longer declared", Before: in.Active.Services[name].Container})
		}
	}
	return p
}

func (in PlanInput) planService(s *core.ServiceSpec) PlannedService {
	ps := PlannedService{Service: s.Name, Image: in.Resolved[s.Name]}
	if s.Run == core.RunOnce {
		ps.Action, ps.Reason = ActionRunOnce, "one-shot: runs to completion before the services that depend on it"
		return ps
	}
	r := readycheck.Deploy(s, ps.Image.HasHealthcheck)
	ps.Readiness = &r
	cur := in.Active.Services[s.Name]
	if cur == nil || cur.Container == "" {
		ps.Action, ps.Reason = ActionSequential, "nothing serves it yet"
		return ps
	}
	ps.Before = cur.Container
	if id := in.Restore[s.Name]; id != "" {
		ps.Action, ps.Reason = ActionSequential, "its volumes are restored from snapshot "+id
		return ps
	}
	if why := in.changed(s, cur); why == "" {
		ps.Action = ActionUnchanged
		ps.Reason = "already running " + cur.Running()
		if s.Image != cur.Spec.Image {
			ps.Reason += sameImageNote(s, cur)
		}
		return ps
	} else {
		ps.Change = why
	}
	if in.onlyInstanceCount(s, cur) {
		ps.Action = ActionScale
		ps.Reason = fmt.Sprintf("only the instance count changes (%d → %d): the serving generation gains or loses instances", cur.Spec.Instances(), s.Instances())
		return ps
	}
	if core.CanOverlap(s, &cur.Spec) {
		ps.Action, ps.Reason = ActionOverlap, "stateless: no volume, bind, device or UDP"
		return ps
	}
	ps.Action = ActionSequential
	if s.Replace == core.ReplaceSequential {
		ps.Reason = `declared replace = "sequential"`
	} else if r := notEligible(s); r != "" {
		ps.Reason = r
	} else {
		ps.Reason = "predecessor " + notEligible(&cur.Spec)
	}
	return ps
}

// notEligible names the first reason s is not overlap-eligible (R16), "".
func notEligible(s *core.ServiceSpec) string { return core.NotOverlapEligible(s) }

// changed returns why s cannot stay unchanged (R15), "" when it can. When
// the image changes, the manifest keys that change with it are named too
// ("image digest; also env, stop_grace"), so the plan hides none of them.
func (in PlanInput) changed(s *core.ServiceSpec, cur *core.ActiveService) string {
	img, ok := in.Resolved[s.Name]
	also := func(reason string) string {
		if keys := SpecChanges(&cur.Spec, sameImageRef(s, cur)); len(keys) > 0 {
			return reason + "; also " + strings.Join(keys, ", ")
		}
		return reason
	}
	switch {
	case !ok && s.Build != nil:
		return also("build context: the deploy builds it, and replaces the service only if the built image differs from the serving one")
	case (!ok || img.Digest == "" || img.Digest != cur.Digest) && s.Build != nil:
		return also("build context; image changed")
	case !ok || img.Digest == "" || img.Digest != cur.Digest:
		return also("image digest")
	case len(s.Binds) > 0:
		return "binds are always re-resolved"
	case len(s.Devices) > 0:
		return "devices are always re-resolved"
	case !dpSameSpec(sameImageRef(s, cur), &cur.Spec):
		if keys := SpecChanges(&cur.Spec, sameImageRef(s, cur)); len(keys) > 0 {
			return "service spec: " + strings.Join(keys, ", ")
		}
		return "service spec"
	}
	if n := len(cur.Instances()); n != s.Instances() {
		return fmt.Sprintf("%d of %d instances running", n, s.Instances())
	}
	for _, in := range cur.Instances() {
		for _, p := range s.BackendPorts() {
			m := in.BackendBinds
			if p.Protocol == "udp" {
				m = in.UDPBackendBinds
			}
			if m[p.Port] == 0 {
				return fmt.Sprintf("no recorded bind for %d/%s", p.Port, p.Protocol)
			}
		}
	}
	if in.PendingWithdrawals[s.Name] {
		return "pending withdrawal"
	}
	if cur.EffectiveRevision != in.Revision.ID {
		env, ok := in.EffectiveEnv[cur.EffectiveRevision]
		if !ok || !maps.Equal(env, in.Revision.Spec.Env) {
			return "app env"
		}
	}
	if !dpSameStrings(in.Active.Networks, in.Revision.Spec.Networks) {
		return "shared networks"
	}
	for _, m := range in.Markers {
		if m.Service == s.Name && m.Container == cur.Container && m.Blocking() {
			return "container has a " + m.Reason + " marker"
		}
	}
	st, ok := in.Observed[cur.Container]
	if !ok || !st.Running() {
		return "container not running"
	}
	for _, id := range cur.ReplicaIDs() {
		if st, ok := in.Observed[id]; !ok || !st.Running() {
			return "replica " + id + " not running"
		}
	}
	for _, sec := range s.Secrets {
		if sec.As == "file" {
			return "file secrets are always re-delivered"
		}
	}
	desired, ok := in.DesiredEnv[s.Name]
	if !ok {
		desired = dpContainerEnv(in.Revision.Spec.Env, s.Env, nil)
	}
	have := map[string]bool{}
	for _, kv := range st.Env {
		have[kv] = true
	}
	for _, kv := range desired {
		if !have[kv] {
			return "container env"
		}
	}
	return ""
}

// dpContainerEnv merges app env, service env (overrides) and env secrets
// (override both) into sorted "KEY=value" entries (S28).
func dpContainerEnv(app, svc map[string]string, secrets map[string]string) []string {
	m := map[string]string{}
	for k, v := range app {
		m[k] = v
	}
	for k, v := range svc {
		m[k] = v
	}
	for k, v := range secrets {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// sameImageRef returns s with the serving spec's image reference when
// both name the image the service runs (changed checked the digests
// first): a new tag of the same image (a build context change that built
// the same image ID) replaces nothing.
func sameImageRef(s *core.ServiceSpec, cur *core.ActiveService) *core.ServiceSpec {
	if s.Image == cur.Spec.Image {
		return s
	}
	c := *s
	c.Image = cur.Spec.Image
	return &c
}

// sameImageNote is the unchanged reason's tail for a service whose image
// reference changed to the same image: "; build context changed; image
// unchanged" for a service a plan builds, else that the new reference
// names the same image.
func sameImageNote(s *core.ServiceSpec, cur *core.ActiveService) string {
	if s.Build != nil {
		return "; build context changed; image unchanged"
	}
	return fmt.Sprintf("; %s is the same image as %s", s.Image, cur.Spec.Image)
}

func dpSameSpec(a, b *core.ServiceSpec) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// dpSameStrings reports whether a and b hold the same strings, in any order.
func dpSameStrings(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// PlanDeploy observes and plans req without any effect (deploy --dry-run):
// it resolves the revision and images (ResolveImage only, never pulls; an
// image that is not present plans as changed), loads ACTIVE, markers,
// pending withdrawals and secrets, inspects the ACTIVE containers, then
// calls the planner. With req.Spec set it plans that spec (nothing stored;
// an app never deployed plans every service as a first deployment).
// Errors: unknown app/revision wrap ErrNotFound; an unknown targeted
// service wraps ErrInvalid.
func (e *Engine) PlanDeploy(ctx context.Context, req DeployRequest) (Plan, error) {
	var rev core.Revision
	if req.Spec != nil {
		rev = core.Revision{ID: UnsavedRevision, App: req.App, Spec: *req.Spec}
		if rev.App == "" {
			rev.App = req.Spec.Name
		}
	} else {
		var err error
		if rev, err = e.resolveRevision(ctx, req.App, req.Revision); err != nil {
			return Plan{}, err
		}
	}
	if err := checkTargets(rev, req.Services); err != nil {
		return Plan{}, err
	}
	resolved := map[string]core.ImageRef{}
	var imageErrs []error
	var warnings []string
	for i, s := range rev.Spec.Services {
		if img, err := e.Runtime.ResolveImage(ctx, s.Image); err == nil {
			resolved[s.Name] = img
			if err := checkPinnedImage(rev.App, &rev.Spec.Services[i], img); err != nil {
				imageErrs = append(imageErrs, err)
			}
		} else if !errors.Is(err, core.ErrNotFound) {
			return Plan{}, fmt.Errorf("app %s: service %s: resolve image %s: %w", rev.App, s.Name, s.Image, err)
		} else {
			warnings = append(warnings, missingImageWarning(&rev.Spec.Services[i], req.Pull))
		}
		if err := e.CheckSecretsSet(ctx, nil, rev.App, &rev.Spec.Services[i]); err != nil {
			warnings = append(warnings, fmt.Sprintf("service %s: %v; the deploy is refused unless it is set first or a compose file provides it", s.Name, err))
		}
	}
	if len(imageErrs) > 0 {
		// A deploy would refuse this spec at preflight (unmapped VOLUME).
		return Plan{}, errors.Join(imageErrs...)
	}
	active, err := e.LoadActive(ctx, rev.App)
	if err != nil {
		return Plan{}, err
	}
	in, err := e.observe(ctx, nil, rev, active, resolved)
	if err != nil {
		return Plan{}, err
	}
	in.Services = req.Services
	plan := in.Build()
	plan.Warnings = warnings
	return plan, nil
}

// missingImageWarning is the plan's line for an image the engine does not
// have: the deploy builds it (a service with a build section, R12), or
// pulls it, unless pull is PullNever (refused).
func missingImageWarning(s *core.ServiceSpec, pull string) string {
	switch {
	case s.Build != nil:
		return fmt.Sprintf("service %s: image %s is not on the engine yet: the deploy builds it first (a dry run builds nothing)", s.Name, s.Image)
	case pull == PullNever:
		return fmt.Sprintf("service %s: image %s is not on the engine and --pull=never: the deploy would be refused", s.Name, s.Image)
	}
	return fmt.Sprintf("service %s: image %s is not on the engine: the deploy pulls it first (or --copy-images copies it), and fails if it cannot", s.Name, s.Image)
}

// SpecChanges lists the manifest keys whose value differs between two
// specs of a service, by their JSON names, sorted ("stop_signal",
// "container.user", "healthcheck"): the container keys are reported one
// level down (container.<key>), the rest at the top level.
func SpecChanges(prev, next *core.ServiceSpec) []string {
	a, b := specFields(prev), specFields(next)
	var out []string
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || string(w) != string(v) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// specFields flattens a spec's JSON into key -> raw value, with the
// "container" object split into "container.<key>".
func specFields(s *core.ServiceSpec) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	b, err := json.Marshal(s)
	if err != nil {
		return out
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return out
	}
	for k, v := range top {
		if k != "container" {
			out[k] = v
			continue
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(v, &inner) != nil {
			out[k] = v
			continue
		}
		for ik, iv := range inner {
			out["container."+ik] = iv
		}
	}
	return out
}

// observe gathers the planner's inputs for rev: markers, pending
// withdrawals, the inspected ACTIVE containers, effective revisions' app
// env and the desired env (with secret values) of every service; c is the
// memo of the lock hold it runs under (nil: PlanDeploy, which holds none).
func (e *Engine) observe(ctx context.Context, c *steps.HeldChecks, rev core.Revision, active core.Active, resolved map[string]core.ImageRef) (PlanInput, error) {
	app := rev.App
	in := PlanInput{Revision: rev, Active: active, Resolved: resolved,
		Observed: map[string]core.ContainerState{}, EffectiveEnv: map[string]map[string]string{}, DesiredEnv: map[string][]string{}}
	markers, err := e.Store.LoadMarkers(ctx, app)
	if err != nil {
		return in, fmt.Errorf("app %s: load markers: %w", app, err)
	}
	in.Markers = markers
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return in, fmt.Errorf("app %s: load recovery: %w", app, err)
	}
	in.PendingWithdrawals = rec.PendingWithdrawals
	for _, s := range rev.Spec.Services {
		cur := active.Services[s.Name]
		if cur == nil || cur.Container == "" {
			continue
		}
		for _, inst := range cur.Instances() {
			if st, err := e.Runtime.InspectContainer(ctx, inst.Container); err == nil {
				in.Observed[inst.Container] = st
			}
		}
		if _, ok := in.EffectiveEnv[cur.EffectiveRevision]; !ok && cur.EffectiveRevision != rev.ID {
			if r, err := e.Store.LoadRevision(ctx, app, cur.EffectiveRevision); err == nil {
				in.EffectiveEnv[cur.EffectiveRevision] = r.Spec.Env
			}
		}
		env, _, err := e.SecretEnv(ctx, c, app, &s)
		if err != nil {
			// Unknown secret values can never prove the env unchanged.
			in.DesiredEnv[s.Name] = []string{"\x00unresolved secrets"}
			continue
		}
		in.DesiredEnv[s.Name] = dpContainerEnv(rev.Spec.Env, s.Env, env)
	}
	return in, nil
}
