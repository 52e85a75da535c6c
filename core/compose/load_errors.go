package compose

import (
	"fmt"
	"regexp"

	"github.com/gordon-deploy/docker-gordon/core"
)

// schemaErrorRE matches compose-go's schema errors: "validating FILE:
// KEY.PATH message".
var schemaErrorRE = regexp.MustCompile(`^validating (.+?): ([A-Za-z0-9_.\-]+) (.+)$`)

// loadError turns an error of compose-go's loader into a located Problem
// when it names a key path, else wraps it in core.ErrInvalid.
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
	return fmt.Errorf("compose: %w: %w", core.ErrInvalid, err)
}
