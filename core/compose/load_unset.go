package compose

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// invalidSpecRE matches compose-go's error for a volume (or port) spec
// that does not parse: "invalid spec: :/media/: empty section between
// colons".
var invalidSpecRE = regexp.MustCompile(`invalid spec: (.*?): (.+)$`)

// varRefRE is a variable reference: $NAME, ${NAME}, or ${NAME…} with a
// modifier (${NAME:-default}, ${NAME?err}).
var varRefRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// unsetVarProblem locates an invalid spec that an unset variable broke
// (compose reports only the spec, e.g. ":/media/"): the line of a config
// file whose text, with its unset variables replaced by nothing, holds
// the spec, with those variables' names. ok is false when no such line is
// found.
func unsetVarProblem(err error, configPaths []string, env map[string]string) (Problem, bool) {
	m := invalidSpecRE.FindStringSubmatch(err.Error())
	if m == nil || m[1] == "" {
		return Problem{}, false
	}
	spec, why := m[1], m[2]
	for _, f := range configPaths {
		data, rerr := os.ReadFile(f)
		if rerr != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for line := 1; sc.Scan(); line++ {
			text := sc.Text()
			var unset []string
			expanded := varRefRE.ReplaceAllStringFunc(text, func(ref string) string {
				sm := varRefRE.FindStringSubmatch(ref)
				name, mod := sm[1]+sm[3], sm[2]
				if v, ok := env[name]; ok {
					return v
				}
				if mod != "" {
					return ref // a default or a required-variable message: compose's own
				}
				unset = append(unset, name)
				return ""
			})
			if len(unset) == 0 || !strings.Contains(expanded, spec) {
				continue
			}
			col := strings.Index(text, "$") + 1
			return Problem{File: displayName(absPath(f)), Line: line, Column: col,
				Message: fmt.Sprintf("%q (%s) after interpolation: variable %s is not set; set it in the environment or the project's .env file, or give a default (${%s:-/path})",
					spec, why, strings.Join(unset, ", "), unset[0])}, true
		}
	}
	return Problem{}, false
}
