package swarm

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gordon-deploy/docker-gordon/internal/durable"
)

// secretNameKeyFile is the key of the secret names' MAC, relative to the
// state directory: 32 random bytes, mode 0600, made at the first file
// secret.
const secretNameKeyFile = "swarm/secret-name.key"

// secretNameKey returns the key secretName MACs with: the state
// directory's (<StateDir>/swarm/secret-name.key, created when missing;
// two processes creating it at once agree on the first one linked into
// place), or, without a state directory, a random key of this process
// (its names then differ from another process's for the same content:
// a new secret, never a wrong one).
func (r *Runtime) secretNameKey() ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.nameKey != nil {
		return r.nameKey, nil
	}
	if r.opts.StateDir == "" {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		r.nameKey = k
		return k, nil
	}
	k, err := loadOrMakeKey(filepath.Join(r.opts.StateDir, secretNameKeyFile))
	if err != nil {
		return nil, fmt.Errorf("the secret-name key: %w", err)
	}
	r.nameKey = k
	return k, nil
}

// loadOrMakeKey reads the 32-byte key at path, or makes one: written
// to a private temporary file, fsynced, then hard-linked to path, so a
// concurrent maker's key, linked first, wins and is read back.
func loadOrMakeKey(path string) ([]byte, error) {
	if k, err := os.ReadFile(path); err == nil && len(k) == 32 {
		return k, nil
	} else if err == nil {
		return nil, fmt.Errorf("%s holds %d bytes, not 32: remove it (the secrets made with it are then made anew at the next deploy)", path, len(k))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-name-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(k)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, werr
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if err := durable.SyncDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if k, err = os.ReadFile(path); err == nil && len(k) != 32 {
		err = fmt.Errorf("%s holds %d bytes, not 32", path, len(k))
	}
	return k, err
}
