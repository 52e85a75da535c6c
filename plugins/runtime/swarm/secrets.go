package swarm

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// File secrets. On one engine a file secret is a
// per-container copy in the state directory, bind-mounted read-only at
// /run/secrets/<name> (core.Mount.Secret marks it). A task may run on
// another machine, so on a swarm each becomes a Docker secret named
// gordon-<app>-<secret>-<12 hex of HMAC-SHA256(key, app, secret, content)>
// (a new secret per content; labels dev.gordon.managed=true and
// dev.gordon.app), created
// when absent and referenced by the service at the same target, with the
// copy's uid, gid and mode. RemoveContainer removes the secrets the
// service referenced once no other service references them.

// maxSecretSize is Swarm's bound on a secret's data (500 KiB).
const maxSecretSize = 500 * 1024

// secretFile is one file secret an instance references.
type secretFile struct {
	name     string // the Docker secret's name
	data     []byte
	target   string
	uid, gid string
	mode     os.FileMode
}

// secretName is gordon-<app>-<secret>-<12 hex of HMAC-SHA256(key,
// app NUL secret NUL data)>, within Swarm's 64 characters (app and secret
// are cut when longer; the MAC still tells contents apart). The key is
// the state directory's secret-name key (nameKey): a name lets nobody
// who lacks it (anyone who lists secrets or reads a task spec) test
// guesses of a low-entropy value, as a plain content hash would.
func secretName(key []byte, app, secret string, data []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(app + "\x00" + secret + "\x00"))
	m.Write(data)
	head := "gordon-" + app + "-" + secret
	if max := 64 - 13; len(head) > max {
		head = head[:max]
	}
	return head + "-" + hex.EncodeToString(m.Sum(nil))[:12]
}

// secretFiles reads the file secrets among c's mounts (the per-container
// copies the engine wrote): content, target, owner and mode. A missing
// copy wraps core.ErrNotFound; content over 500 KiB core.ErrInvalid.
func secretFiles(key []byte, c core.ContainerSpec) ([]secretFile, error) {
	var out []secretFile
	app := c.Labels[core.LabelApp]
	for _, m := range c.Mounts {
		if m.Secret == "" {
			continue
		}
		data, err := os.ReadFile(m.Source)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("file secret %s: %w: its copy %s is gone", m.Secret, core.ErrNotFound, m.Source)
		}
		if err != nil {
			return nil, fmt.Errorf("file secret %s: %w: %w", m.Secret, core.ErrUnavailable, err)
		}
		if len(data) > maxSecretSize {
			return nil, fmt.Errorf("file secret %s: %w: %d bytes; a Docker secret holds at most 500 KiB", m.Secret, core.ErrInvalid, len(data))
		}
		st, err := os.Stat(m.Source)
		if err != nil {
			return nil, fmt.Errorf("file secret %s: %w: %w", m.Secret, core.ErrUnavailable, err)
		}
		f := secretFile{name: secretName(key, app, m.Secret, data), data: data, target: m.Target, uid: "0", gid: "0", mode: st.Mode().Perm()}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			f.uid, f.gid = strconv.FormatUint(uint64(sys.Uid), 10), strconv.FormatUint(uint64(sys.Gid), 10)
		}
		out = append(out, f)
	}
	return out, nil
}

// secretRef is the service's reference to secret f, created with ID id.
func secretRef(f secretFile, id string) *swarm.SecretReference {
	return &swarm.SecretReference{SecretID: id, SecretName: f.name,
		File: &swarm.SecretReferenceFileTarget{Name: f.target, UID: f.uid, GID: f.gid, Mode: f.mode}}
}

// ensureSecrets creates the Docker secrets of c's file secrets that do not
// exist yet and returns the service's references to them.
func (r *Runtime) ensureSecrets(ctx context.Context, c core.ContainerSpec, what string) ([]*swarm.SecretReference, error) {
	key, err := r.secretNameKey()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	files, err := secretFiles(key, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var refs []*swarm.SecretReference
	for _, f := range files {
		id, err := r.findSecret(ctx, f.name, what)
		if err != nil {
			return nil, err
		}
		if id == "" {
			res, cerr := r.cli.SecretCreate(ctx, client.SecretCreateOptions{Spec: swarm.SecretSpec{
				Annotations: swarm.Annotations{Name: f.name, Labels: map[string]string{core.LabelManaged: "true", core.LabelApp: c.Labels[core.LabelApp]}},
				Data:        f.data,
			}})
			if cerr != nil {
				if id, err = r.findSecret(ctx, f.name, what); err != nil || id == "" { // lost a race: take theirs
					return nil, r.classify(cerr, what+": create secret "+f.name)
				}
			} else {
				id = res.ID
			}
		}
		refs = append(refs, secretRef(f, id))
	}
	return refs, nil
}

// findSecret returns the ID of the secret named exactly name ("" when
// absent).
func (r *Runtime) findSecret(ctx context.Context, name, what string) (string, error) {
	res, err := r.cli.SecretList(ctx, client.SecretListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil {
		return "", r.classify(err, what+": list secrets")
	}
	for _, s := range res.Items {
		if s.Spec.Name == name {
			return s.ID, nil
		}
	}
	return "", nil
}

// dropSecrets removes the gordon-managed secrets among refs (those of a
// service just removed) that no remaining service references. A secret
// Swarm still finds in use, or already gone, is left alone.
func (r *Runtime) dropSecrets(ctx context.Context, refs []*swarm.SecretReference, what string) error {
	if len(refs) == 0 {
		return nil
	}
	managed, err := r.cli.SecretList(ctx, client.SecretListOptions{Filters: make(client.Filters).Add("label", core.LabelManaged+"=true")})
	if err != nil {
		return r.classify(err, what+": list secrets")
	}
	svcs, err := r.cli.ServiceList(ctx, client.ServiceListOptions{})
	if err != nil {
		return r.classify(err, what+": list services")
	}
	var errs []error
	for _, id := range unreferenced(refs, managed.Items, svcs.Items) {
		_, err := r.cli.SecretRemove(ctx, id, client.SecretRemoveOptions{})
		if err != nil && !cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "in use") {
			errs = append(errs, r.classify(err, what+": remove secret "+short(id)))
		}
	}
	return errors.Join(errs...)
}

// unreferenced is the IDs among refs of managed secrets that none of svcs
// references.
func unreferenced(refs []*swarm.SecretReference, managed []swarm.Secret, svcs []swarm.Service) []string {
	ours := map[string]bool{}
	for _, s := range managed {
		ours[s.ID] = true
	}
	used := map[string]bool{}
	for _, s := range svcs {
		if cs := s.Spec.TaskTemplate.ContainerSpec; cs != nil {
			for _, ref := range cs.Secrets {
				used[ref.SecretID] = true
			}
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, ref := range refs {
		if ref != nil && ours[ref.SecretID] && !used[ref.SecretID] && !seen[ref.SecretID] {
			seen[ref.SecretID] = true
			out = append(out, ref.SecretID)
		}
	}
	return out
}
