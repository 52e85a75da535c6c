package journal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Secrets (decision 13) live under secrets/<incarnation>/: a service's
// values in <service>/<name>, per-container copies for file delivery in
// containers/<container>/<name>. Files are 0600 in 0700 directories and
// written atomically. Every name is one path component (no separator, no
// leading dot, so no ".."); violations wrap core.ErrInvalid. Values are
// never logged and never appear in errors.

// secretsDir returns secrets/<incarnation> of the app's live incarnation.
// With create, an absent app is created (EnsureApp) so `secrets set` may
// precede the first deploy.
func (s *Store) secretsDir(ctx context.Context, app string, create bool) (string, error) {
	var info core.AppInfo
	var err error
	if create {
		info, err = s.EnsureApp(ctx, app)
	} else {
		info, err = s.LoadApp(ctx, app)
	}
	if err != nil {
		return "", err
	}
	if err := validName("incarnation", info.Incarnation); err != nil {
		return "", fmt.Errorf("app %s: %w", app, err)
	}
	return filepath.Join(s.dir, "secrets", info.Incarnation), nil
}

func validNames(kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if err := validName(kv[i], kv[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// SetSecret writes secrets/<incarnation>/<service>/<name> (0600), creating
// the app's identity when absent.
func (s *Store) SetSecret(ctx context.Context, app, service, name string, value []byte) error {
	if err := validNames("app", app, "service", service, "secret", name); err != nil {
		return err
	}
	dir, err := s.secretsDir(ctx, app, true)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, service, name), value); err != nil {
		return fmt.Errorf("app %s service %s secret %s: %w", app, service, name, err)
	}
	return nil
}

// GetSecret returns a secret's value; an absent app or secret wraps
// core.ErrNotFound.
func (s *Store) GetSecret(ctx context.Context, app, service, name string) ([]byte, error) {
	if err := validNames("app", app, "service", service, "secret", name); err != nil {
		return nil, err
	}
	dir, err := s.secretsDir(ctx, app, false)
	if err != nil {
		return nil, err
	}
	v, err := os.ReadFile(filepath.Join(dir, service, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("app %s service %s secret %s: %w", app, service, name, core.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("journal: app %s service %s secret %s: %w", app, service, name, err)
	}
	return v, nil
}

// ListSecrets returns the service's secret names, sorted; none (or no app)
// → empty.
func (s *Store) ListSecrets(ctx context.Context, app, service string) ([]string, error) {
	if err := validNames("app", app, "service", service); err != nil {
		return nil, err
	}
	dir, err := s.secretsDir(ctx, app, false)
	if errors.Is(err, core.ErrNotFound) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(dir, service))
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: app %s service %s: list secrets: %w", app, service, err)
	}
	names := []string{}
	for _, e := range entries {
		if e.Type().IsRegular() && validName("secret", e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// RemoveSecret deletes a secret; an absent app or secret wraps
// core.ErrNotFound.
func (s *Store) RemoveSecret(ctx context.Context, app, service, name string) error {
	if err := validNames("app", app, "service", service, "secret", name); err != nil {
		return err
	}
	dir, err := s.secretsDir(ctx, app, false)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, service, name)
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("app %s service %s secret %s: %w", app, service, name, core.ErrNotFound)
	}
	return removeFile(p)
}

// WriteContainerSecret writes the per-container copy
// secrets/<incarnation>/containers/<container>/<name> (0600) and returns its
// absolute host path, to be bind-mounted read-only at /run/secrets/<name>.
// An absent app wraps core.ErrNotFound.
func (s *Store) WriteContainerSecret(ctx context.Context, app, container, name string, value []byte) (string, error) {
	if err := validNames("app", app, "container", container, "secret", name); err != nil {
		return "", err
	}
	dir, err := s.secretsDir(ctx, app, false)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "containers", container, name)
	if err := writeFileAtomic(p, value); err != nil {
		return "", fmt.Errorf("app %s container %s secret %s: %w", app, container, name, err)
	}
	return p, nil
}

// DeleteContainerSecrets removes every per-container copy of container
// (decision 13: when it is retired); none, or no app, is not an error.
func (s *Store) DeleteContainerSecrets(ctx context.Context, app, container string) error {
	if err := validNames("app", app, "container", container); err != nil {
		return err
	}
	dir, err := s.secretsDir(ctx, app, false)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	cdir := filepath.Join(dir, "containers", container)
	if _, err := os.Lstat(cdir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.RemoveAll(cdir); err != nil {
		return fmt.Errorf("journal: app %s container %s: delete secrets: %w", app, container, err)
	}
	return syncDir(filepath.Dir(cdir))
}
