package system

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// caRootCopy is where `edge start` copies --acme-ca-root, inside the state
// directory the edge container has bind-mounted.
const caRootCopy = "acme-ca-root.pem"

// acmeFlags are the flags that configure ACME: giving one turns a
// remembered --no-acme off.
var acmeFlags = []string{"acme-email", "acme-ca", "acme-ca-root"}

// resolve fills the settings not given now from the last start; it
// reports whether any came from there. A flag given now wins over a
// remembered one: an --acme-* flag given without --no-acme means ACME,
// whatever the last start remembered.
func (o *TLSOptions) resolve(changed func(string) bool, last edgeStartTLS) bool {
	used := false
	take := func(name string, dst *string, v string) {
		if !changed(name) && v != "" && *dst != v {
			*dst, used = v, true
		}
	}
	take("https-addr", &o.HTTPSAddr, last.HTTPSAddr)
	take("acme-email", &o.ACMEEmail, last.ACMEEmail)
	take("acme-ca", &o.ACMECA, last.ACMECA)
	take("acme-ca-root", &o.ACMECARoot, last.ACMECARoot)
	acmeGiven := false
	for _, name := range acmeFlags {
		acmeGiven = acmeGiven || changed(name)
	}
	if !changed("no-acme") && !acmeGiven && last.NoACME && !o.NoACME {
		o.NoACME, used = true, true
	}
	return used
}

func (o *TLSOptions) remembered() edgeStartTLS {
	return edgeStartTLS{HTTPSAddr: o.HTTPSAddr, ACMEEmail: o.ACMEEmail, ACMECA: o.ACMECA, ACMECARoot: o.ACMECARoot, NoACME: o.NoACME}
}

// EdgeArgs returns gordon-edge run's HTTPS flags (none without an HTTPS
// address). With container set the CA root is copied into <state>/edge
// (the only host path the edge container sees), that copy is passed and
// o remembers it (the file the flag named may be gone at the next start:
// a remote runner's input). An unreadable CA root is core.ErrInvalid.
func (o *TLSOptions) EdgeArgs(stateDir string, container bool) ([]string, error) {
	if o.HTTPSAddr == "" {
		return nil, nil
	}
	out := []string{"--https-addr", o.HTTPSAddr}
	if o.NoACME {
		return append(out, "--acme=false"), nil
	}
	if o.ACMEEmail != "" {
		out = append(out, "--acme-email", o.ACMEEmail)
	}
	if o.ACMECA != "" {
		out = append(out, "--acme-ca", o.ACMECA)
	}
	if o.ACMECARoot != "" {
		root := o.ACMECARoot
		if container {
			b, err := os.ReadFile(o.ACMECARoot)
			if err != nil {
				return nil, fmt.Errorf("--acme-ca-root: %w: %w", core.ErrInvalid, err)
			}
			root = filepath.Join(stateDir, "edge", caRootCopy)
			if err := os.MkdirAll(filepath.Dir(root), 0o700); err != nil {
				return nil, err
			}
			if err := os.WriteFile(root, b, 0o644); err != nil {
				return nil, fmt.Errorf("--acme-ca-root: copy into the state directory: %w", err)
			}
			o.ACMECARoot = root
		}
		out = append(out, "--acme-ca-root", root)
	}
	return out, nil
}

// withEdgeTLS appends the HTTPS flags to the edge unit's command (the unit's
// hash covers them, so changing them replaces the container).
func withEdgeTLS(u *docker.Unit, o *TLSOptions, stateDir string) error {
	args, err := o.EdgeArgs(stateDir, true)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		if err := EnsureCertsDir(stateDir); err != nil {
			return err
		}
	}
	u.Cmd = append(u.Cmd, args...)
	// The image is FROM scratch: without the host's roots the edge could
	// not verify a public ACME server.
	if len(args) > 0 && !o.NoACME && o.ACMECARoot == "" {
		if fi, err := os.Stat(hostRoots); err == nil && fi.IsDir() {
			u.Binds = append(u.Binds, hostRoots+":"+hostRoots+":ro")
		}
	}
	return nil
}

// hostRoots is where Debian (and Go's root loader) keep the system CAs.
const hostRoots = "/etc/ssl/certs"
