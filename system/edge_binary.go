package system

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/gordon-deploy/docker-gordon/system/docker"
	"github.com/gordon-deploy/docker-gordon/system/remote"
)

// FindEdgeBinary returns the gordon-edge installed beside this binary
// (install.sh links it into the plugin directory; make build puts both in
// bin/), else the first gordon-edge on PATH.
func FindEdgeBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		for _, dir := range []string{filepath.Dir(self), dirOfTarget(self)} {
			p := filepath.Join(dir, "gordon-edge")
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, nil
			}
		}
	}
	if p, err := exec.LookPath("gordon-edge"); err == nil {
		return p, nil
	}
	if remote.Current() != nil {
		return "", errors.New("gordon-edge is not in the runner image: install it next to docker-gordon on the machine you run docker gordon from (./install.sh); the runner image carries it from there")
	}
	return "", errors.New("gordon-edge not found beside docker-gordon nor on PATH: run ./install.sh")
}

// dirOfTarget is the directory of the file self links to ("" when none).
func dirOfTarget(self string) string {
	if t, err := filepath.EvalSymlinks(self); err == nil {
		return filepath.Dir(t)
	}
	return ""
}

// NoteEdgeBinary says on out which gordon-edge binary unit u installs and,
// on errw, warns when the first gordon-edge on PATH is a different build
// (the installed one is used; PATH's is not).
func NoteEdgeBinary(out, errw io.Writer, u docker.Unit) {
	bin := u.Binaries["/gordon-edge"]
	if bin == "" {
		return
	}
	fmt.Fprintf(out, "gordon-edge: binary %s\n", bin)
	other, err := exec.LookPath("gordon-edge")
	if err != nil {
		return
	}
	if o, err := filepath.EvalSymlinks(other); err == nil && o != bin && !sameContent(o, bin) {
		fmt.Fprintf(errw, "warning: the gordon-edge on PATH (%s) is another build than the installed one (%s), which is the one used; remove it or reinstall (./install.sh)\n", other, bin)
	}
}

// sameContent reports whether files a and b have the same bytes (false
// when either cannot be read).
func sameContent(a, b string) bool {
	da, err := os.ReadFile(a)
	if err != nil {
		return false
	}
	db, err := os.ReadFile(b)
	return err == nil && bytes.Equal(da, db)
}
