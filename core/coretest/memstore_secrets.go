package coretest

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// LoadOwnership implements core.Store.
func (s *MemStore) LoadOwnership(ctx context.Context, app string) (core.Ownership, error) {
	if err := s.enter("LoadOwnership"); err != nil {
		return core.Ownership{}, err
	}
	defer s.mu.Unlock()
	o, ok := s.owner[app]
	if !ok {
		return core.Ownership{}, nf("app " + app + " ownership")
	}
	s.ok("LoadOwnership")
	return clone(o), nil
}

// SaveOwnership implements core.Store (event ownership-save).
func (s *MemStore) SaveOwnership(ctx context.Context, o core.Ownership) error {
	if err := s.enter("SaveOwnership"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.owner[o.App] = clone(o)
	s.known[o.App] = true
	s.ok("SaveOwnership")
	s.ev.Add("ownership-save", o.App)
	return nil
}

// Archived returns the ownership records archived by EndIncarnation.
func (s *MemStore) Archived(app string) []core.Ownership {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(append([]core.Ownership{}, s.archived[app]...))
}

// LoadRecovery implements core.Store (absent → empty).
func (s *MemStore) LoadRecovery(ctx context.Context, app string) (core.Recovery, error) {
	if err := s.enter("LoadRecovery"); err != nil {
		return core.Recovery{}, err
	}
	defer s.mu.Unlock()
	s.ok("LoadRecovery")
	return clone(s.recovery[app]), nil
}

// SaveRecovery implements core.Store (event recovery-save).
func (s *MemStore) SaveRecovery(ctx context.Context, app string, r core.Recovery) error {
	if err := s.enter("SaveRecovery"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.recovery[app] = clone(r)
	s.known[app] = true
	s.ok("SaveRecovery")
	s.ev.Add("recovery-save", app)
	return nil
}

// EndIncarnation implements core.Store (event end-incarnation): archives
// the ownership (incarnation set from app.json when empty) and clears
// app.json, desired, active, intent, markers and recovery. Revisions, ops,
// claims and secrets are kept.
func (s *MemStore) EndIncarnation(ctx context.Context, app string) error {
	if err := s.enter("EndIncarnation"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if o, ok := s.owner[app]; ok {
		if o.Incarnation == "" {
			o.Incarnation = s.apps[app].Incarnation
		}
		s.archived[app] = append(s.archived[app], o)
		delete(s.owner, app)
	}
	delete(s.apps, app)
	delete(s.desired, app)
	delete(s.active, app)
	delete(s.intent, app)
	delete(s.markers, app)
	delete(s.recovery, app)
	s.ok("EndIncarnation")
	s.ev.Add("end-incarnation", app)
	return nil
}

func skey(a, b, c string) string { return a + "\x00" + b + "\x00" + c }

// secretKey keys a secret by the app's current incarnation (decision 13),
// so a reused name never sees an ended incarnation's secrets. Caller holds s.mu.
func (s *MemStore) secretKey(app, service, name string) string {
	return skey(app+"\x00"+s.apps[app].Incarnation, service, name)
}

// checkNames rejects path-like secret, service and container names with
// ErrInvalid (they become path elements in the journal).
func checkNames(kind string, names ...string) error {
	for _, n := range names {
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\\\x00") {
			return fmt.Errorf("%s name %q: %w", kind, n, core.ErrInvalid)
		}
	}
	return nil
}

// SetSecret implements core.Store (path-like names → ErrInvalid).
func (s *MemStore) SetSecret(ctx context.Context, app, service, name string, value []byte) error {
	if err := checkNames("secret", app, service, name); err != nil {
		return err
	}
	if err := s.enter("SetSecret"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.secrets[s.secretKey(app, service, name)] = append([]byte(nil), value...)
	s.ok("SetSecret")
	return nil
}

// GetSecret implements core.Store.
func (s *MemStore) GetSecret(ctx context.Context, app, service, name string) ([]byte, error) {
	if err := checkNames("secret", app, service, name); err != nil {
		return nil, err
	}
	if err := s.enter("GetSecret"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	v, ok := s.secrets[s.secretKey(app, service, name)]
	if !ok {
		return nil, nf("app " + app + " service " + service + " secret " + name)
	}
	s.ok("GetSecret")
	return append([]byte(nil), v...), nil
}

// ListSecrets implements core.Store (names, sorted).
func (s *MemStore) ListSecrets(ctx context.Context, app, service string) ([]string, error) {
	if err := checkNames("secret", app, service); err != nil {
		return nil, err
	}
	if err := s.enter("ListSecrets"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	prefix := s.secretKey(app, service, "")
	out := []string{}
	for k := range s.secrets {
		if strings.HasPrefix(k, prefix) {
			out = append(out, strings.TrimPrefix(k, prefix))
		}
	}
	sort.Strings(out)
	s.ok("ListSecrets")
	return out, nil
}

// RemoveSecret implements core.Store (absent → ErrNotFound).
func (s *MemStore) RemoveSecret(ctx context.Context, app, service, name string) error {
	if err := checkNames("secret", app, service, name); err != nil {
		return err
	}
	if err := s.enter("RemoveSecret"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	k := s.secretKey(app, service, name)
	if _, ok := s.secrets[k]; !ok {
		return nf("app " + app + " service " + service + " secret " + name)
	}
	delete(s.secrets, k)
	s.ok("RemoveSecret")
	return nil
}

// WriteContainerSecret implements core.Store; the path is
// "/mem/secrets/<app>/<container>/<name>".
func (s *MemStore) WriteContainerSecret(ctx context.Context, app, container, name string, value []byte) (string, error) {
	if err := checkNames("container secret", app, container, name); err != nil {
		return "", err
	}
	if err := s.enter("WriteContainerSecret"); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	s.csecrets[skey(app, container, name)] = append([]byte(nil), value...)
	s.ok("WriteContainerSecret")
	return "/mem/secrets/" + app + "/" + container + "/" + name, nil
}

// DeleteContainerSecrets implements core.Store (event secrets-delete;
// none → no error).
func (s *MemStore) DeleteContainerSecrets(ctx context.Context, app, container string) error {
	if err := checkNames("container secret", app, container); err != nil {
		return err
	}
	if err := s.enter("DeleteContainerSecrets"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	prefix := skey(app, container, "")
	for k := range s.csecrets {
		if strings.HasPrefix(k, prefix) {
			delete(s.csecrets, k)
		}
	}
	s.ok("DeleteContainerSecrets")
	s.ev.Add("secrets-delete", container)
	return nil
}

// ContainerSecrets returns the names of container's per-container secret
// copies, sorted.
func (s *MemStore) ContainerSecrets(app, container string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	prefix := skey(app, container, "")
	out := []string{}
	for k := range s.csecrets {
		if strings.HasPrefix(k, prefix) {
			out = append(out, strings.TrimPrefix(k, prefix))
		}
	}
	sort.Strings(out)
	return out
}

// ArchivedOwnership is Archived with the journal's signature (prune.Archive).
func (s *MemStore) ArchivedOwnership(ctx context.Context, app string) ([]core.Ownership, error) {
	return s.Archived(app), nil
}

// ArchivedApps returns, sorted, the apps with an archived ownership.
func (s *MemStore) ArchivedApps(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for a, o := range s.archived {
		if len(o) > 0 {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out, nil
}

// PutFile implements core.Store (event file-put with the name when it
// was not stored yet); the path is "/mem/files/<app>/<name>".
func (s *MemStore) PutFile(ctx context.Context, app, name string, data []byte, mode uint32) (string, error) {
	if err := checkNames("file", app, name); err != nil {
		return "", err
	}
	if err := s.enter("PutFile"); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	if _, ok := s.files[skey(app, "", name)]; !ok {
		s.files[skey(app, "", name)] = append([]byte(nil), data...)
		s.ev.Add("file-put", name)
	}
	s.ok("PutFile")
	return "/mem/files/" + app + "/" + name, nil
}

// FilePath implements core.Store.
func (s *MemStore) FilePath(ctx context.Context, app, name string) (string, error) {
	if err := checkNames("file", app, name); err != nil {
		return "", err
	}
	if err := s.enter("FilePath"); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	if _, ok := s.files[skey(app, "", name)]; !ok {
		return "", fmt.Errorf("app %s: stored file %s: %w", app, name, core.ErrNotFound)
	}
	s.ok("FilePath")
	return "/mem/files/" + app + "/" + name, nil
}

// File returns the content of a stored project file and whether it is.
func (s *MemStore) File(app, name string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.files[skey(app, "", name)]
	return v, ok
}
