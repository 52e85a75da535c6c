// Package usererr makes a command's errors speak the user's words: no
// engine error classes and no Go context errors in what the CLI prints.
package usererr

import (
	"errors"
	"github.com/gordon-deploy/docker-gordon/core"
	"strings"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"
)

// errorClasses are the engine's error classes (core.ErrNotFound,
// ErrConflict, ErrInvalid). They are how callers tell errors apart, not
// words for the user: a message names what failed and what to do.
var errorClasses = []string{"state conflict", "not found", "invalid argument"}

// goContextWords are Go's context errors and what they mean to a user.
var goContextWords = strings.NewReplacer("context canceled", "interrupted", "context deadline exceeded", "timed out")

// Words rewrites an error message for the user: an error class that
// starts the message or one of its ": "-separated parts is dropped
// ("state conflict: before_switch hook failed" → "before_switch hook
// failed"), as is one that ends it ("…; stop it first: state conflict");
// Go's context errors read "interrupted" and "timed out".
func Words(msg string) string {
	for _, class := range errorClasses {
		msg = strings.TrimSuffix(msg, ": "+class)
		if msg == class {
			continue
		}
		msg = strings.TrimPrefix(msg, class+": ")
		msg = strings.ReplaceAll(msg, ": "+class+": ", ": ")
	}
	msg = goContextWords.Replace(msg)
	msg = strings.ReplaceAll(msg, "interrupted: interrupted", "interrupted")
	return strings.ReplaceAll(msg, "timed out: timed out", "timed out")
}

// userError is an error whose message is Words of the one it wraps.
type userError struct {
	msg string
	err error
}

func (e userError) Error() string { return e.msg }
func (e userError) Unwrap() error { return e.err }

// Plain makes every command's error speak the user's words
// (Words). A cli.StatusError keeps its type and exit code (the docker
// CLI reads both) with its Status rewritten.
func Plain(c *cobra.Command) {
	for _, sub := range c.Commands() {
		Plain(sub)
	}
	run := c.RunE
	if run == nil {
		return
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		err := run(cmd, args)
		if err == nil {
			return nil
		}
		var se cli.StatusError
		if errors.As(err, &se) {
			se.Status = Words(se.Status)
			return se
		}
		if msg := Words(err.Error()); msg != err.Error() {
			return userError{msg: msg, err: err}
		}
		return err
	}
}

// WarningLine is one journal warning as printed: "warning: SERVICE:
// DETAIL", then "(leftover container ID)" only when a container was left
// behind.
func WarningLine(wa core.Warning) string {
	line := "warning: "
	if wa.Service != "" {
		line += wa.Service + ": "
	}
	line += wa.Detail
	if wa.Leftover != "" {
		line += " (leftover container " + shortID(wa.Leftover) + ")"
	}
	return line
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
