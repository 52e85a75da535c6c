package composeapi

import (
	"fmt"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Problem is one thing in a compose project that docker gordon cannot
// honour, or one manifest rule the mapped project breaks.
type Problem struct {
	// File is the compose file the key comes from (the last of the -f files
	// that sets it); empty when the key could not be located.
	File string `json:"file,omitempty"`
	// Line and Column locate the key, both 1-based; 0 when unknown.
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
	// Service is the compose service, empty for a top-level key.
	Service string `json:"service,omitempty"`
	// Key is the compose key path, e.g. "services.web.network_mode".
	Key string `json:"key,omitempty"`
	// Message says what cannot be honoured and what to do instead.
	Message string `json:"message"`
}

// String formats the problem as "file:line:col: key: message".
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", p.Line, p.Column)
		}
		b.WriteString(": ")
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Error lists every problem of one compose project at once. It wraps
// core.ErrInvalid. Nothing was stored, deployed or written when it is
// returned: a project is converted whole or not at all.
type Error struct {
	// Files are the compose files as given, in merge order.
	Files []string `json:"files"`
	// Problems in file, line and column order (unlocated ones last); never
	// empty.
	Problems []Problem `json:"problems"`
}

// Error prints one problem per line.
func (e *Error) Error() string {
	lines := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		lines = append(lines, p.String())
	}
	if len(lines) == 0 {
		return fmt.Sprintf("%s: %s", strings.Join(e.Files, ", "), core.ErrInvalid)
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns core.ErrInvalid.
func (e *Error) Unwrap() error { return core.ErrInvalid }
