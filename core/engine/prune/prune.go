package prune

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/retention"
)

// Kinds of Item.
const (
	KindContainer = "container"
	KindImage     = "image"
	KindNetwork   = "network"
	KindVolume    = "volume"
	KindOp        = "op"
	KindRevision  = "revision"
	KindSnapshot  = "snapshot"
)

// RoleBuild is the dev.gordon.role label of an image docker gordon built
// (imagebuild.Labels sets it).
const RoleBuild = "build"

// DefaultKeepImages is how many earlier built images per service a prune
// keeps besides the serving one (the image `rollback` returns to).
const DefaultKeepImages = 1

// Request selects what a prune looks at.
type Request struct {
	// App limits the prune to one app ("" = every app this state
	// directory knows).
	App string
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
	// KeepImages is how many earlier built images per service are kept
	// besides the serving one; negative means DefaultKeepImages.
	KeepImages int
}

// Item is one object a prune removed (or, in a dry run, would remove), or
// one it kept on purpose (Report.Kept).
type Item struct {
	Kind    string `json:"kind"`
	App     string `json:"app,omitempty"`
	Service string `json:"service,omitempty"`
	// Name is the object's name: a container's ID (12 characters), an
	// image's tag (else its ID), a network's or volume's name, an op's or
	// revision's id.
	Name string `json:"name"`
	// Reason says why it goes (or why it stays, in Kept).
	Reason string `json:"reason"`
	// Hint is the command that removes a kept object ("" when none).
	Hint string `json:"hint,omitempty"`
}

// Report is the result of a prune. Removed lists, in a dry run, exactly
// what the same real run would remove.
type Report struct {
	DryRun  bool   `json:"dry_run"`
	Removed []Item `json:"removed"`
	Kept    []Item `json:"kept"`
	// Skipped names the apps not pruned and why (an unfinished operation).
	Skipped []Item `json:"skipped,omitempty"`
	// Errors are the objects that could not be removed, in words.
	Errors []string `json:"errors,omitempty"`
}

// Run prunes with e's store, runtime and lock, objs for images, networks
// and volumes, and arch for the incarnations removed apps ended (nil: none
// are looked at). Errors: an unknown app (wraps core.ErrNotFound), a
// store or engine that cannot be read, a lock not taken in time; a removal
// that fails is reported in Report.Errors and the prune goes on (the
// caller exits non-zero when any).
func Run(ctx context.Context, e *steps.Engine, objs Objects, arch Archive, req Request) (*Report, error) {
	if req.KeepImages < 0 {
		req.KeepImages = DefaultKeepImages
	}
	apps, err := selectApps(ctx, e, arch, req.App)
	if err != nil {
		return nil, err
	}
	rep := &Report{DryRun: req.DryRun, Removed: []Item{}, Kept: []Item{}}
	inUse, err := objs.ImagesInUse(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the engine's containers: %w", err)
	}
	images, err := objs.BuiltImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list built images: %w", err)
	}
	for _, app := range apps {
		if err := pruneApp(ctx, e, objs, arch, req, app, inUse, images, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// selectApps returns app (checked to be known here) or every app this
// state directory holds a record of (current, or removed with an archived
// incarnation), sorted.
func selectApps(ctx context.Context, e *steps.Engine, arch Archive, app string) ([]string, error) {
	if app == "" {
		apps, err := e.Store.ListApps(ctx)
		if err != nil || arch == nil {
			return apps, err
		}
		ended, err := arch.ArchivedApps(ctx)
		if err != nil {
			return nil, err
		}
		for _, a := range ended {
			if !slices.Contains(apps, a) {
				apps = append(apps, a)
			}
		}
		slices.Sort(apps)
		return apps, nil
	}
	known, ended, err := e.KnownHere(ctx, app)
	if err != nil {
		return nil, err
	}
	if !known && !ended {
		return nil, fmt.Errorf("%w: unknown app %q (docker gordon status lists the apps)", core.ErrNotFound, app)
	}
	return []string{app}, nil
}

// pruneApp prunes one app under its lock.
func pruneApp(ctx context.Context, e *steps.Engine, objs Objects, arch Archive, req Request, app string, inUse map[string]bool, images []Image, rep *Report) error {
	lk, err := e.Lock(ctx, app, "prune", "")
	if err != nil {
		return err
	}
	if req.DryRun {
		defer lk.AppLock.Unlock() // without the retention a release applies
	} else {
		defer lk.Unlock()
	}
	info, err := e.Store.LoadApp(ctx, app)
	current := err == nil
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("app %s: %w", app, err)
	}
	if op, err := e.Store.LatestOp(ctx, app); err == nil && !op.Terminal() {
		rep.Skipped = append(rep.Skipped, Item{Kind: "app", App: app, Name: app,
			Reason: "operation " + op.ID + " (" + opVerb(op) + ") did not finish", Hint: "docker gordon reconcile " + app})
		return nil
	}
	if current {
		if err := pruneContainers(ctx, e, req, app, rep); err != nil {
			return err
		}
		if err := pruneRecords(ctx, e, req, app, rep); err != nil {
			return err
		}
	}
	if err := pruneImages(ctx, e, objs, req, app, current, inUse, images, rep); err != nil {
		return err
	}
	if err := pruneSnapshots(e, req, app, rep); err != nil {
		return err
	}
	return pruneEnded(ctx, objs, arch, req, app, info.Incarnation, rep)
}

func opVerb(op core.Operation) string {
	if op.Verb != "" {
		return op.Verb
	}
	return op.Kind
}

// pruneContainers removes the app's containers no record owns and the
// stopped containers of superseded generations awaiting retirement.
func pruneContainers(ctx context.Context, e *steps.Engine, req Request, app string, rep *Report) error {
	unowned, err := e.UnownedContainers(ctx, app)
	if err != nil {
		return err
	}
	for _, c := range unowned {
		svc := c.Labels[core.LabelService]
		it := Item{Kind: KindContainer, App: app, Service: svc, Name: short(c.ID), Reason: "no record names it (" + c.Status + ")"}
		retire(ctx, e, req, app, c.ID, steps.RetireOptions{Service: svc, Force: true}, it, rep)
	}
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("app %s: load ACTIVE: %w", app, err)
	}
	markers, err := e.Store.LoadMarkers(ctx, app)
	if err != nil {
		return fmt.Errorf("app %s: load markers: %w", app, err)
	}
	for _, m := range markers {
		if m.Reason != core.MarkerRetirementPending || servedBy(active, m.Container) {
			continue
		}
		st, err := e.Runtime.InspectContainer(ctx, m.Container)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return fmt.Errorf("app %s: inspect container %s: %w", app, short(m.Container), err)
		}
		if err == nil && st.Running() {
			continue // draining: the periodic pass retires it
		}
		status := "gone"
		if err == nil {
			status = st.Status
		}
		it := Item{Kind: KindContainer, App: app, Service: m.Service, Name: short(m.Container), Reason: "superseded generation (" + status + ")"}
		retire(ctx, e, req, app, m.Container, steps.RetireOptions{Service: m.Service, Force: true, ClearMarker: true}, it, rep)
	}
	return nil
}

// servedBy reports whether ACTIVE names id in any service.
func servedBy(a core.Active, id string) bool {
	for _, s := range a.Services {
		if s.Names(id) {
			return true
		}
	}
	return false
}

func retire(ctx context.Context, e *steps.Engine, req Request, app, id string, o steps.RetireOptions, it Item, rep *Report) {
	if req.DryRun {
		rep.Removed = append(rep.Removed, it)
		return
	}
	res := e.Retire(ctx, app, id, o)
	if !res.Gone {
		rep.Errors = append(rep.Errors, fmt.Sprintf("app %s: container %s (service %s) could not be removed: %v", app, it.Name, it.Service, res.Err(id)))
		return
	}
	rep.Removed = append(rep.Removed, it)
}

// pruneRecords drops ops and revisions past the retention (as the lock's
// release does after every operation), listing them.
func pruneRecords(ctx context.Context, e *steps.Engine, req Request, app string, rep *Report) error {
	if e.Retention.Ops <= 0 && e.Retention.Revisions <= 0 {
		return nil
	}
	var opIDs, revIDs []string
	var err error
	if req.DryRun {
		opIDs, revIDs, err = selectRecords(ctx, e, app)
	} else {
		opIDs, revIDs, err = e.Store.Prune(ctx, app, e.Retention.Ops, e.Retention.Revisions)
	}
	if err != nil {
		return fmt.Errorf("app %s: ops and revisions past retention: %w", app, err)
	}
	for _, id := range opIDs {
		rep.Removed = append(rep.Removed, Item{Kind: KindOp, App: app, Name: id, Reason: fmt.Sprintf("past retention (newest %d ops kept)", e.Retention.Ops)})
	}
	for _, id := range revIDs {
		rep.Removed = append(rep.Removed, Item{Kind: KindRevision, App: app, Name: id, Reason: fmt.Sprintf("past retention (newest %d revisions kept)", e.Retention.Revisions)})
	}
	return nil
}

// selectRecords is what Store.Prune would remove (retention.Select).
func selectRecords(ctx context.Context, e *steps.Engine, app string) (ops, revs []string, err error) {
	allOps, err := e.Store.ListOps(ctx, app)
	if err != nil {
		return nil, nil, err
	}
	allRevs, err := e.Store.ListRevisions(ctx, app)
	if err != nil {
		return nil, nil, err
	}
	latest := ""
	if op, err := e.Store.LatestOp(ctx, app); err == nil {
		latest = op.ID
	}
	desired, _ := e.Store.LoadDesired(ctx, app)
	active, _ := e.Store.LoadActive(ctx, app)
	ops, revs = retention.Select(allOps, allRevs, latest, desired, active, e.Retention.Ops, e.Retention.Revisions)
	return ops, revs, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// pruneSnapshots removes the app's partial snapshots (a crash cut them
// off: never listed nor restored) and names the complete ones it keeps:
// they go by their keep or by `snapshots rm` (docs/data.md).
func pruneSnapshots(e *steps.Engine, req Request, app string, rep *Report) error {
	if e.Snapshots == nil {
		return nil
	}
	ids, err := e.Snapshots.Partial(app)
	if err == nil && !req.DryRun {
		ids, err = e.Snapshots.Sweep(app)
	}
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	for _, id := range ids {
		rep.Removed = append(rep.Removed, Item{Kind: KindSnapshot, App: app, Name: id, Reason: "partial: a crash cut it off while it was taken"})
	}
	list, err := e.Snapshots.List(app)
	if err != nil {
		return err
	}
	for _, m := range list {
		rep.Kept = append(rep.Kept, Item{Kind: KindSnapshot, App: app, Service: m.Service, Name: m.ID,
			Reason: "a " + m.Trigger + " snapshot: snapshots go by their keep or by snapshots rm", Hint: "docker gordon snapshots rm " + app + " " + m.ID})
	}
	return nil
}
