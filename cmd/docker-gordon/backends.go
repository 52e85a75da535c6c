package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// backendsName is the file name of the gordon-backends binary of this very
// build (cmd/gordon-backends), stamped by the Makefile
// (-X main.backendsName=gordon-backends-<build id>) and installed beside
// docker-gordon under that name. The build id in the name ties the two
// binaries together: a docker-gordon never runs another build's backends.
// Empty (a plain `go build`): built-ins re-execute docker-gordon itself.
var backendsName = ""

// builtinExe is the executable the plugin host runs for a built-in backend
// plugin: the file backendsName beside self (after resolving symlinks:
// docker may reach this binary through one) when it is a regular
// executable file, else self, which serves every built-in as well. why
// says, when self is returned although the file exists, why it was not
// used (for the debug log); empty otherwise. It costs one stat, no exec
// (gordon-backends completes its handshake in about a
// third of the time docker-gordon takes, since it links neither the CLI
// nor the compose loader).
func builtinExe(self string) (exe, why string) {
	if backendsName == "" {
		return self, ""
	}
	if resolved, err := filepath.EvalSymlinks(self); err == nil {
		self = resolved
	}
	sib := filepath.Join(filepath.Dir(self), backendsName)
	st, err := os.Stat(sib)
	if err != nil {
		return self, ""
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return self, sib + " is not an executable file"
	}
	return sib, ""
}

// composeName is the file name of the gordon-compose helper of this very
// build (cmd/gordon-compose), stamped by the Makefile
// (-X main.composeName=gordon-compose-<build id>) and installed beside
// docker-gordon under that name, like backendsName. Only a build with
// -tags gordoncomposehelper, which does not link the compose loader, runs
// it (compose_helper.go).
var composeName = ""

// composeHelperExe is the gordon-compose helper beside self (after
// resolving symlinks), or an error saying why there is none to run: a
// compose file cannot be loaded without it. It costs one stat.
func composeHelperExe(self string) (string, error) {
	if composeName == "" {
		return "", errors.New("this docker-gordon was built without the compose loader (-tags gordoncomposehelper) and without the name of its gordon-compose helper (-X main.composeName=...): build it with make build")
	}
	if resolved, err := filepath.EvalSymlinks(self); err == nil {
		self = resolved
	}
	sib := filepath.Join(filepath.Dir(self), composeName)
	st, err := os.Stat(sib)
	if err != nil {
		return "", fmt.Errorf("this docker-gordon loads compose files with %s, which is not beside it (install.sh installs both): %w", composeName, err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("this docker-gordon loads compose files with %s, which is not an executable file", sib)
	}
	return sib, nil
}
