package edgestate

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// AdminTokenFile (in <state>/edge) holds the bearer token of the edge's
// admin API: 64 hex characters, mode 0600, readable by the state
// directory's user only. Every admin request but GET /healthz carries it
// ("Authorization: Bearer <token>").
const AdminTokenFile = "admin.token"

// EnsureAdminToken returns the admin token of the edge directory dir
// (<state>/edge), creating AdminTokenFile (32 random bytes, hex, 0600)
// when it is missing. Creation is atomic and never replaces a token
// another edge made first; an existing file that group or others may read
// is set to 0600. Errors name the file.
func EnsureAdminToken(dir string) (string, error) {
	path := filepath.Join(dir, AdminTokenFile)
	if tok, err := ReadAdminToken(dir); err != nil || tok != "" {
		if err == nil {
			err = restrict(path)
		}
		return tok, err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".admin.token-*")
	if err != nil {
		return "", fmt.Errorf("admin token %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(b[:]) + "\n")
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Sync(), tmp.Close()); err != nil {
		return "", fmt.Errorf("admin token %s: %w", path, err)
	}
	// A link never replaces: the first edge's token wins.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("admin token %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	tok, err := ReadAdminToken(dir)
	if err == nil && tok == "" {
		err = fmt.Errorf("admin token %s is empty: remove it and start the edge again", path)
	}
	return tok, err
}

// ReadAdminToken returns the admin token of the edge directory dir, ""
// with no error when AdminTokenFile does not exist (an edge that has not
// started yet).
func ReadAdminToken(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, AdminTokenFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// restrict sets path to 0600 when group or others have any access.
func restrict(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return fmt.Errorf("admin token %s is readable by others and cannot be restricted: %w", path, err)
		}
	}
	return nil
}
