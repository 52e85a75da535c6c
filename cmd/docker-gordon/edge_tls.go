package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// edgeTLSFlags are the HTTPS flags of `edge run`, `edge start` and
// `system start` (passed to gordon-edge run; SPEC R62).
type edgeTLSFlags struct {
	httpsAddr, acmeEmail, acmeCA, acmeCARoot string
	noACME                                   bool
}

// edgeStartTLS is the HTTPS part of edge/start.json (remembered like the
// HTTP address).
type edgeStartTLS struct {
	HTTPSAddr  string `json:"https_addr,omitempty"`
	ACMEEmail  string `json:"acme_email,omitempty"`
	ACMECA     string `json:"acme_ca,omitempty"`
	ACMECARoot string `json:"acme_ca_root,omitempty"`
	NoACME     bool   `json:"no_acme,omitempty"`
}

// caRootCopy is where `edge start` copies --acme-ca-root, inside the state
// directory the edge container has bind-mounted.
const caRootCopy = "acme-ca-root.pem"

func (f *edgeTLSFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.httpsAddr, "https-addr", "", "public HTTPS listen address, e.g. :443 (HTTP/2 and HTTP/1.1; certificates by ACME and docker gordon certs add); default: the last start's, else none")
	fl.StringVar(&f.acmeEmail, "acme-email", "", "ACME account contact email")
	fl.StringVar(&f.acmeCA, "acme-ca", "", "ACME directory URL (default Let's Encrypt production; a staging URL works the same)")
	fl.StringVar(&f.acmeCARoot, "acme-ca-root", "", "PEM file of the root to trust for the ACME server (private CAs, tests)")
	fl.BoolVar(&f.noACME, "no-acme", false, "obtain no certificates: serve only those added with docker gordon certs add (remembered; a later start with an --acme-* flag, or --no-acme=false, obtains them again)")
}

// acmeFlags are the flags that configure ACME: giving one turns a
// remembered --no-acme off.
var acmeFlags = []string{"acme-email", "acme-ca", "acme-ca-root"}

// resolve fills the flags not given from the last start; it reports
// whether any came from there. A flag given now wins over a remembered
// one: an --acme-* flag given without --no-acme means ACME, whatever the
// last start remembered.
func (f *edgeTLSFlags) resolve(cmd *cobra.Command, last edgeStartTLS) bool {
	used := false
	take := func(name string, dst *string, v string) {
		if !cmd.Flags().Changed(name) && v != "" && *dst != v {
			*dst, used = v, true
		}
	}
	take("https-addr", &f.httpsAddr, last.HTTPSAddr)
	take("acme-email", &f.acmeEmail, last.ACMEEmail)
	take("acme-ca", &f.acmeCA, last.ACMECA)
	take("acme-ca-root", &f.acmeCARoot, last.ACMECARoot)
	acmeGiven := false
	for _, name := range acmeFlags {
		acmeGiven = acmeGiven || cmd.Flags().Changed(name)
	}
	if !cmd.Flags().Changed("no-acme") && !acmeGiven && last.NoACME && !f.noACME {
		f.noACME, used = true, true
	}
	return used
}

// options are the flags as the system plane takes them.
func (f edgeTLSFlags) options() system.TLSOptions {
	return system.TLSOptions{HTTPSAddr: f.httpsAddr, ACMEEmail: f.acmeEmail, ACMECA: f.acmeCA, ACMECARoot: f.acmeCARoot, NoACME: f.noACME}
}

func (f *edgeTLSFlags) remembered() edgeStartTLS {
	return edgeStartTLS{HTTPSAddr: f.httpsAddr, ACMEEmail: f.acmeEmail, ACMECA: f.acmeCA, ACMECARoot: f.acmeCARoot, NoACME: f.noACME}
}

// args returns gordon-edge's HTTPS flags. With container set the CA root
// is copied into <state>/edge (the only host path the edge container
// sees), that copy is passed and f remembers it (the file the flag named
// may be gone at the next start: a remote runner's input).
func (f *edgeTLSFlags) args(stateDir string, container bool) ([]string, error) {
	if f.httpsAddr == "" {
		return nil, nil
	}
	out := []string{"--https-addr", f.httpsAddr}
	if f.noACME {
		return append(out, "--acme=false"), nil
	}
	if f.acmeEmail != "" {
		out = append(out, "--acme-email", f.acmeEmail)
	}
	if f.acmeCA != "" {
		out = append(out, "--acme-ca", f.acmeCA)
	}
	if f.acmeCARoot != "" {
		root := f.acmeCARoot
		if container {
			b, err := os.ReadFile(f.acmeCARoot)
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
			f.acmeCARoot = root
		}
		out = append(out, "--acme-ca-root", root)
	}
	return out, nil
}

// withEdgeTLS appends the HTTPS flags to the edge unit's command (the unit's
// hash covers them, so changing them replaces the container).
func withEdgeTLS(u *docker.Unit, f *edgeTLSFlags, stateDir string) error {
	args, err := f.args(stateDir, true)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		if err := system.EnsureCertsDir(stateDir); err != nil {
			return err
		}
	}
	u.Cmd = append(u.Cmd, args...)
	// The image is FROM scratch: without the host's roots the edge could
	// not verify a public ACME server.
	if len(args) > 0 && !f.noACME && f.acmeCARoot == "" {
		if fi, err := os.Stat(hostRoots); err == nil && fi.IsDir() {
			u.Binds = append(u.Binds, hostRoots+":"+hostRoots+":ro")
		}
	}
	return nil
}

// hostRoots is where Debian (and Go's root loader) keep the system CAs.
const hostRoots = "/etc/ssl/certs"
