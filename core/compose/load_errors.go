package compose

import (
	"fmt"
	"regexp"

	"github.com/gordon-deploy/docker-gordon/core"
)

// schemaErrorRE matches compose-go's schema errors: "validating FILE:
// KEY.PATH message".
var schemaErrorRE = regexp.MustCompile(`^validating (.+?): ([A-Za-z0-9_.\-]+) (.+)$`)

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
		p := Problem{File: at.File, Line: at.Line, Column: at.Column, Service: serviceOf(m[2]), Key: m[2], Message: m[3]}
		return &Error{Files: []string{file}, Problems: []Problem{p}}
	}
	if p, ok := consistencyProblem(msg, ps); ok {
		return &Error{Files: ps.names(), Problems: []Problem{p}}
	}
	return fmt.Errorf("compose: %w: %w", core.ErrInvalid, err)
}

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
