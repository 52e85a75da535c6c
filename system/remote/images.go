package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
)

// localEngine is a client of this machine's engine (the default context's
// socket), the source of deploy --copy-images.
func localEngine() (*client.Client, error) {
	return client.New(client.WithHost(client.DefaultDockerHost))
}

// ShipImages makes sure the target engine can run every image the manifest
// names, before anything changes there. An image the target has (by
// reference) is fine. One it lacks that this machine's engine has is sent
// (ImageSave → ImageLoad, streamed, with progress and size) when copy is
// set; without copy the target pulls it first with the client's registry
// credentials (SPEC R13), and only when that pull fails is it refused,
// naming the image, the pull's error and --copy-images. One neither has is
// left to the remote deploy's pull. An image the target already has by ID
// is never sent again. Progress goes to w; registryAuth gives the
// X-Registry-Auth value for a reference ("" for none).
func ShipImages(ctx context.Context, w io.Writer, dst client.APIClient, t Target, images []string, copy bool, registryAuth func(ref string) string) error {
	var src *client.Client
	defer func() {
		if src != nil {
			src.Close()
		}
	}()
	seen := map[string]bool{}
	for _, ref := range images {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		if src == nil {
			var err error
			if src, err = localEngine(); err != nil {
				return fmt.Errorf("local engine: %w", err)
			}
		}
		have, herr := dst.ImageInspect(ctx, ref)
		if herr != nil && !cerrdefs.IsNotFound(herr) {
			return fmt.Errorf("image %s on %s: %w", ref, t, dockererr.Classify(herr))
		}
		local, lerr := src.ImageInspect(ctx, ref)
		if lerr != nil && !cerrdefs.IsNotFound(lerr) {
			return fmt.Errorf("image %s on the local engine: %w", ref, dockererr.Classify(lerr))
		}
		switch {
		case herr == nil && (lerr != nil || local.ID == have.ID):
			if copy {
				fmt.Fprintf(w, "image %s: already on %s (%s)\n", ref, t.Context, shortID(have.ID))
			}
			continue
		case herr == nil && !copy:
			fmt.Fprintf(w, "warning: image %s on %s (%s) is not this machine's (%s); the server's is deployed (--copy-images sends this one)\n",
				ref, t.Context, shortID(have.ID), shortID(local.ID))
			continue
		case lerr != nil:
			continue // on neither engine: the remote deploy's pull decides
		case !copy:
			if err := pullOnTarget(ctx, w, dst, t, ref, local.ID, registryAuth(ref)); err != nil {
				return fmt.Errorf("image %s is not on %s, which could not pull it (%w)%s; it is on this machine's engine: pass --copy-images to send it (or push it to a registry the server can pull from); nothing was changed",
					ref, t, err, loginHint(ref, err))
			}
			continue
		}
		if byID, err := dst.ImageInspect(ctx, local.ID); err == nil {
			// The target has the image under another name: tag it.
			if _, err := dst.ImageTag(ctx, client.ImageTagOptions{Source: byID.ID, Target: ref}); err != nil {
				return fmt.Errorf("image %s: tag %s on %s: %w", ref, shortID(byID.ID), t, dockererr.Classify(err))
			}
			fmt.Fprintf(w, "image %s: already on %s by ID (%s), tagged\n", ref, t.Context, shortID(byID.ID))
			continue
		}
		if err := copyImage(ctx, w, src, dst, t, ref, local.ID, local.Size); err != nil {
			return err
		}
	}
	return nil
}

// pullOnTarget pulls ref on the target engine dst with the client's
// registry credentials for it (none: anonymously) and waits for the pull.
// A pulled image whose ID is not localID (this machine's copy) is deployed
// all the same, with a warning. The error is the engine's, classified
// (core.ErrNotFound, ErrUnavailable, …).
func pullOnTarget(ctx context.Context, w io.Writer, dst client.APIClient, t Target, ref, localID, auth string) error {
	fmt.Fprintf(w, "image %s: not on %s; pulling it there\n", ref, t.Context)
	resp, err := dst.ImagePull(ctx, ref, client.ImagePullOptions{RegistryAuth: auth})
	if err != nil {
		return dockererr.Classify(err)
	}
	defer resp.Close()
	if err := resp.Wait(ctx); err != nil {
		if cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "manifest unknown") {
			return fmt.Errorf("%w: %w", core.ErrNotFound, err)
		}
		return fmt.Errorf("%w: %w", core.ErrUnavailable, err)
	}
	have, err := dst.ImageInspect(ctx, ref)
	if err != nil {
		return dockererr.Classify(err)
	}
	if have.ID != localID {
		fmt.Fprintf(w, "warning: image %s pulled on %s (%s) is not this machine's (%s); the pulled one is deployed (--copy-images sends this one)\n",
			ref, t.Context, shortID(have.ID), shortID(localID))
		return nil
	}
	fmt.Fprintf(w, "image %s: pulled on %s (%s)\n", ref, t.Context, shortID(have.ID))
	return nil
}

// loginHint is what to add to a failed pull of ref that a registry refused
// for want of (valid) credentials: "; docker login <registry> first"; "" for
// any other failure.
func loginHint(ref string, err error) string {
	s := strings.ToLower(err.Error())
	for _, k := range []string{"unauthorized", "authentication required", "no basic auth credentials", "denied"} {
		if strings.Contains(s, k) {
			return "; if the registry needs a login: docker login " + RegistryHost(ref) + ", then retry"
		}
	}
	return ""
}

// copyImage streams ImageSave of ref on src into ImageLoad on dst, printing
// progress (bytes sent of the image's size) at most once a second.
func copyImage(ctx context.Context, w io.Writer, src, dst client.APIClient, t Target, ref, id string, size int64) error {
	t0 := time.Now()
	fmt.Fprintf(w, "image %s: copying %s (%s) to %s\n", ref, shortID(id), HumanBytes(size), t.Context)
	rc, err := src.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("copy image %s: save: %w", ref, dockererr.Classify(err))
	}
	defer rc.Close()
	cr := &countingReader{r: rc}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				fmt.Fprintf(w, "image %s: %s sent (%s)\n", ref, HumanBytes(cr.n.Load()), time.Since(t0).Round(time.Second))
			}
		}
	}()
	res, err := dst.ImageLoad(ctx, cr, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("copy image %s: load on %s: %w", ref, t, dockererr.Classify(err))
	}
	defer res.Close()
	if err := drainJSONStream(res); err != nil {
		return fmt.Errorf("copy image %s: load on %s: %w", ref, t, err)
	}
	el := time.Since(t0)
	n := cr.n.Load()
	fmt.Fprintf(w, "image %s: copied %s in %s (%s/s)\n", ref, HumanBytes(n), el.Round(time.Millisecond), HumanBytes(int64(float64(n)/max(el.Seconds(), 0.001))))
	return nil
}

// drainJSONStream reads an engine JSON message stream, returning the first
// error it reports.
func drainJSONStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if m.Error != nil {
			return errors.New(m.Error.Message)
		}
	}
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// HumanBytes formats n as B, kB, MB or GB (powers of 1000).
func HumanBytes(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "kB", "MB", "GB"} {
		if f < 1000 || u == "GB" {
			if u == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1000
	}
	return ""
}
