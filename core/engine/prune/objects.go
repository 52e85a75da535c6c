package prune

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
)

// Objects is what a prune needs of the engine beyond core.Runtime: the
// images docker gordon built, networks and volumes. system/prune
// implements it on the Docker API; tests use a fake.
type Objects interface {
	// ImagesInUse returns the image IDs ("sha256:…") of every container on
	// the engine, running or not, whoever made it.
	ImagesInUse(ctx context.Context) (map[string]bool, error)
	// BuiltImages returns the images labelled dev.gordon.managed=true and
	// dev.gordon.role=build.
	BuiltImages(ctx context.Context) ([]Image, error)
	// ImageID resolves an image reference (tag, tag@digest, ID) to the
	// image's ID; "" and no error when the engine has no such image.
	ImageID(ctx context.Context, ref string) (string, error)
	// RemoveImage removes every tag of im, and so the image when no tag
	// is left; it never forces (an image a container uses stays).
	RemoveImage(ctx context.Context, im Image) error
	// Networks returns the networks labelled dev.gordon.app=app, with the
	// number of containers attached to each.
	Networks(ctx context.Context, app string) ([]Network, error)
	// RemoveNetwork removes the named network.
	RemoveNetwork(ctx context.Context, name string) error
	// Volumes returns the volumes labelled dev.gordon.app=app.
	Volumes(ctx context.Context, app string) ([]Volume, error)
}

// Archive is the history of ended incarnations in this state directory
// (journal.Store, coretest.MemStore): ArchivedOwnership returns the
// ownership record of each of app's (none when it never ended one here),
// ArchivedApps the apps that ended at least one, sorted.
type Archive interface {
	ArchivedOwnership(ctx context.Context, app string) ([]core.Ownership, error)
	ArchivedApps(ctx context.Context) ([]string, error)
}

// Image is one built image.
type Image struct {
	ID     string            `json:"id"`
	Tags   []string          `json:"tags,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Network is one network and the count of containers attached to it.
type Network struct {
	Name       string            `json:"name"`
	Labels     map[string]string `json:"labels,omitempty"`
	Containers int               `json:"containers"`
}

// Volume is one named volume.
type Volume struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// pruneImages removes app's built images nothing keeps (see the package
// doc); an app that is not current (removed) keeps none but those in use.
func pruneImages(ctx context.Context, e *steps.Engine, objs Objects, req Request, app string, current bool, inUse map[string]bool, images []Image, rep *Report) error {
	var mine []Image
	for _, im := range images {
		if im.Labels[core.LabelApp] == app {
			mine = append(mine, im)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	keep := map[string]string{}
	if current {
		var err error
		if keep, err = keptImages(ctx, e, objs, app, req.KeepImages); err != nil {
			return err
		}
	}
	for _, im := range mine {
		svc := im.Labels[core.LabelService]
		name := imageName(im)
		if why, ok := keep[im.ID]; ok {
			rep.Kept = append(rep.Kept, Item{Kind: KindImage, App: app, Service: svc, Name: name, Reason: why})
			continue
		}
		if inUse[im.ID] {
			rep.Kept = append(rep.Kept, Item{Kind: KindImage, App: app, Service: svc, Name: name, Reason: "a container uses it"})
			continue
		}
		it := Item{Kind: KindImage, App: app, Service: svc, Name: name, Reason: "no serving or kept revision uses it"}
		if !current {
			it.Reason = "its app was removed"
		}
		if !req.DryRun {
			if err := objs.RemoveImage(ctx, im); err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("app %s: image %s could not be removed: %v", app, name, err))
				continue
			}
		}
		rep.Removed = append(rep.Removed, it)
	}
	return nil
}

// keptImages maps the image IDs a current app keeps to why: ACTIVE's,
// DESIRED's, and per service the newest keepN other images of its
// revisions (newest revision first).
func keptImages(ctx context.Context, e *steps.Engine, objs Objects, app string, keepN int) (map[string]string, error) {
	keep := map[string]string{}
	resolve := func(ref string) (string, error) {
		if strings.HasPrefix(ref, "sha256:") {
			return ref, nil
		}
		return objs.ImageID(ctx, ref)
	}
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return nil, fmt.Errorf("app %s: load ACTIVE: %w", app, err)
	}
	for _, name := range sortedServices(active) {
		s := active.Services[name]
		for _, ref := range []string{s.Digest, s.Image} {
			if id, err := resolve(ref); err == nil && id != "" {
				keep[id] = "serving"
			}
		}
	}
	revs, err := e.Store.ListRevisions(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("app %s: list revisions: %w", app, err)
	}
	desired, _ := e.Store.LoadDesired(ctx, app)
	kept := map[string]int{} // service → earlier images kept
	for i := len(revs) - 1; i >= 0; i-- {
		r := revs[i]
		for _, s := range r.Spec.Services {
			id, err := resolve(s.Image)
			if err != nil {
				return nil, fmt.Errorf("app %s: image %s: %w", app, s.Image, err)
			}
			if id == "" || keep[id] != "" {
				continue
			}
			switch {
			case r.ID == desired:
				keep[id] = "named by the desired revision " + r.ID
			case kept[s.Name] < keepN:
				kept[s.Name]++
				keep[id] = fmt.Sprintf("revision %s (rollback keeps the newest %d earlier images; --keep changes it)", r.ID, keepN)
			}
		}
	}
	return keep, nil
}

func sortedServices(a core.Active) []string {
	var out []string
	for name, s := range a.Services {
		if s != nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// imageName is an image's tags, else its short ID.
func imageName(im Image) string {
	if len(im.Tags) > 0 {
		return strings.Join(im.Tags, ",")
	}
	return short(strings.TrimPrefix(im.ID, "sha256:"))
}

// pruneEnded handles what the app's ended incarnations (removed apps)
// left: their networks go when nothing is attached (only when the app is
// not current: a new incarnation reuses the app's network name), their
// volumes are named with the command that deletes them.
func pruneEnded(ctx context.Context, objs Objects, arch Archive, req Request, app, current string, rep *Report) error {
	if arch == nil {
		return nil
	}
	owns, err := arch.ArchivedOwnership(ctx, app)
	if err != nil {
		return fmt.Errorf("app %s: read its removed incarnations: %w", app, err)
	}
	ended := map[string]bool{}
	for _, o := range owns {
		if o.Incarnation != "" && o.Incarnation != current {
			ended[o.Incarnation] = true
		}
	}
	if len(ended) == 0 {
		return nil
	}
	if current == "" {
		nets, err := objs.Networks(ctx, app)
		if err != nil {
			return fmt.Errorf("app %s: list networks: %w", app, err)
		}
		for _, n := range nets {
			if n.Labels[core.LabelManaged] != "true" || !ended[n.Labels[core.LabelIncarnation]] {
				continue
			}
			if n.Containers > 0 {
				rep.Kept = append(rep.Kept, Item{Kind: KindNetwork, App: app, Name: n.Name, Reason: fmt.Sprintf("%d containers attached", n.Containers)})
				continue
			}
			if !req.DryRun {
				if err := objs.RemoveNetwork(ctx, n.Name); err != nil {
					rep.Errors = append(rep.Errors, fmt.Sprintf("app %s: network %s could not be removed: %v", app, n.Name, err))
					continue
				}
			}
			rep.Removed = append(rep.Removed, Item{Kind: KindNetwork, App: app, Name: n.Name, Reason: "its app was removed"})
		}
	}
	vols, err := objs.Volumes(ctx, app)
	if err != nil {
		return fmt.Errorf("app %s: list volumes: %w", app, err)
	}
	for _, v := range vols {
		if v.Labels[core.LabelManaged] == "true" && ended[v.Labels[core.LabelIncarnation]] {
			rep.Kept = append(rep.Kept, Item{Kind: KindVolume, App: app, Service: v.Labels[core.LabelService], Name: v.Name,
				Reason: "named volumes are never removed (data of a removed app)", Hint: "docker volume rm " + v.Name})
		}
	}
	return nil
}
