package main

import (
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
// (issue 24 item 6: gordon-backends completes its handshake in about a
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
