package compose

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// schemaErrorRE matches compose-go's schema errors: "validating FILE:
// KEY.PATH message".
var schemaErrorRE = regexp.MustCompile(`^validating (.+?): ([A-Za-z0-9_.\-]+) (.+)$`)

// topLevelKeyRE matches the schema error of an unknown top-level key:
// "validating FILE:  additional properties 'servise' not allowed".
var topLevelKeyRE = regexp.MustCompile(`^validating (.+?):\s+additional properties '([^']+)' not allowed$`)

// loadError turns an error of compose-go's loader into an *Error with one
// located Problem when it names a key path (a schema error) or a service's
// entry (a project check: depends_on cycle, undefined reference), else
// wraps it in core.ErrInvalid. The loader stops at its first error, so
// these come one at a time; the mapping's refusals come all at once.
func loadError(err error, ps *positions) error {
	msg := err.Error()
	if m := schemaErrorRE.FindStringSubmatch(msg); m != nil {
		at := ps.locate(m[2])
		file := displayName(m[1])
		if at.File == "" {
			at.File = file
		}
		p := Problem{File: at.File, Line: at.Line, Column: at.Column, Service: serviceOf(m[2]), Key: m[2], Message: schemaMessage(m[2], m[3])}
		return &Error{Files: []string{file}, Problems: []Problem{p}}
	}
	if m := topLevelKeyRE.FindStringSubmatch(msg); m != nil {
		p := keyProblem(ps, m[2], schemaMessage(m[2], "false schema"))
		return &Error{Files: []string{displayName(m[1])}, Problems: []Problem{p}}
	}
	if problems := loaderProblems(msg, ps); len(problems) > 0 {
		sortProblems(ps.names(), problems)
		return &Error{Files: ps.names(), Problems: problems}
	}
	return fmt.Errorf("compose: %w: %w", core.ErrInvalid, err)
}

// schemaMessage is the text of compose-go's schema error msg at key path
// key. "false schema" is the schema's no-other-keys rule: it says the key
// itself is not one the compose specification defines at that place.
func schemaMessage(key, msg string) string {
	if msg != "false schema" {
		return msg
	}
	name, parent := key, "the top level"
	if i := strings.LastIndex(key, "."); i >= 0 {
		name, parent = key[i+1:], key[:i]
	}
	return fmt.Sprintf("unknown key %q under %s: the compose specification defines no such key there (check its spelling and indentation; a key of your own must start with x-)", name, parent)
}

// loaderProblems returns the located Problems of a loader error that names
// keys or entries without positions: a project check, every value that
// does not decode (all of them, as the loader lists them), or a variable
// that does not interpolate. nil for any other error.
func loaderProblems(msg string, ps *positions) []Problem {
	if p, ok := consistencyProblem(msg, ps); ok {
		return []Problem{p}
	}
	var out []Problem
	if strings.Contains(msg, "decoding failed") {
		for _, m := range decodeErrorRE.FindAllStringSubmatch(msg, -1) {
			text := m[2]
			if v, ok := strings.CutPrefix(text, "invalid size: "); ok {
				text = fmt.Sprintf(`invalid size %s: want a byte size such as "512m" or "2g" (units b, k, m, g)`, v)
			}
			out = append(out, keyProblem(ps, decodePathRE.ReplaceAllString(m[1], ".$1"), text))
		}
	}
	if m := interpolateErrorRE.FindStringSubmatch(msg); m != nil {
		out = append(out, keyProblem(ps, m[1], "cannot interpolate: "+m[2]))
	}
	if m := interpolateFormatRE.FindStringSubmatch(msg); m != nil {
		out = append(out, keyProblem(ps, m[1], fmt.Sprintf("invalid interpolation format in %q: write ${VAR}, ${VAR:-default} or ${VAR:?message}, and a literal $ as $$", m[2])))
	}
	return out
}

// keyProblem is a Problem at the compose key path key.
func keyProblem(ps *positions, key, msg string) Problem {
	at := ps.locate(key)
	if at.File == "" && len(ps.files) == 1 {
		at.File = ps.files[0].file
	}
	return Problem{File: at.File, Line: at.Line, Column: at.Column, Service: serviceOf(key), Key: key, Message: msg}
}

// Loader errors that name a key path in other spellings.
var (
	// A value that does not decode, one per line:
	// "'services[web].mem_limit' invalid size: 'lots'".
	decodeErrorRE = regexp.MustCompile(`(?m)^'([^']+)' (.+)$`)
	// "services[web]" -> "services.web" (indices stay "[0]").
	decodePathRE = regexp.MustCompile(`\[([^\]0-9][^\]]*)\]`)
	// "error while interpolating services.web.image: required variable TAG is missing a value"
	interpolateErrorRE = regexp.MustCompile(`error while interpolating ([A-Za-z0-9_.\-\[\]]+): (.+)`)
	// "invalid interpolation format for services.web.image.\nYou may need ...\nweb:${TAG"
	interpolateFormatRE = regexp.MustCompile(`invalid interpolation format for ([A-Za-z0-9_.\-\[\]]+?)\.\s[^\n]*\n(.*)$`)
)

// compose-go's project checks name a service and an entry but no position.
var (
	// "dependency cycle detected: a -> b -> a"
	cycleRE = regexp.MustCompile(`dependency cycle detected: ((\S+) -> (\S+)(?: -> \S+)*)`)
	// `service "a" depends on undefined service "c"`
	undefinedServiceRE = regexp.MustCompile(`service "([^"]+)" depends on undefined service "([^"]+)"`)
	// `service "a" refers to undefined network front`
	undefinedRefRE = regexp.MustCompile(`service "([^"]+)" refers to undefined (network|volume|secret|config) (\S+?):? `)
)

// consistencyProblem turns one of compose-go's project checks (a
// depends_on cycle, a reference to an undefined service, network, volume,
// secret or config) into a Problem located at the entry that makes it, with
// what to do.
func consistencyProblem(msg string, ps *positions) (Problem, bool) {
	var list, entry, text string
	if m := cycleRE.FindStringSubmatch(msg); m != nil {
		list, entry = "services."+m[2]+".depends_on", m[3]
		text = fmt.Sprintf("dependency cycle: %s; remove one of these depends_on entries", m[1])
	} else if m := undefinedServiceRE.FindStringSubmatch(msg); m != nil {
		list, entry = "services."+m[1]+".depends_on", m[2]
		text = fmt.Sprintf("depends on undefined service %q: declare %s under services:, or remove it from depends_on", m[2], m[2])
	} else if m := undefinedRefRE.FindStringSubmatch(msg + " "); m != nil {
		list, entry = "services."+m[1]+"."+m[2]+"s", m[3]
		text = fmt.Sprintf("refers to undefined %s %s: declare it under the top-level %ss:, or remove it", m[2], m[3], m[2])
	} else {
		return Problem{}, false
	}
	key, at := ps.locateEntry(list, entry)
	return Problem{File: at.File, Line: at.Line, Column: at.Column, Service: serviceOf(key), Key: key, Message: text}, true
}
