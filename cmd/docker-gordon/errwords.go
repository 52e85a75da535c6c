package main

import (
	"errors"
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

// userWords rewrites an error message for the user: an error class that
// starts the message or one of its ": "-separated parts is dropped
// ("state conflict: before_switch hook failed" → "before_switch hook
// failed"), as is one that ends it ("…; stop it first: state conflict");
// Go's context errors read "interrupted" and "timed out".
func userWords(msg string) string {
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

// userError is an error whose message is userWords of the one it wraps.
type userError struct {
	msg string
	err error
}

func (e userError) Error() string { return e.msg }
func (e userError) Unwrap() error { return e.err }

// plainErrors makes every command's error speak the user's words
// (userWords). A cli.StatusError keeps its type and exit code (the docker
// CLI reads both) with its Status rewritten.
func plainErrors(c *cobra.Command) {
	for _, sub := range c.Commands() {
		plainErrors(sub)
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
			se.Status = userWords(se.Status)
			return se
		}
		if msg := userWords(err.Error()); msg != err.Error() {
			return userError{msg: msg, err: err}
		}
		return err
	}
}
