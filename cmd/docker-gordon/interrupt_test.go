package main

import (
	"context"
	"errors"
	"testing"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A verb that fails after its context ended (Ctrl-C, SIGTERM) exits 130
// with its own message; a verb that failed or succeeded otherwise keeps
// its status (decision 5).
func TestInterrupt_FailedVerbAfterCancelExits130(t *testing.T) {
	fail := errors.New("deploy blog: interrupted: context canceled")
	for _, tc := range []struct {
		name     string
		cancel   bool
		err      error
		wantCode int
	}{
		{"interrupted failure", true, cli.StatusError{StatusCode: 1, Status: fail.Error()}, 130},
		{"interrupted plain error", true, fail, 130},
		{"interrupted but finished", true, nil, 0},
		{"failure without interrupt", false, cli.StatusError{StatusCode: 2, Status: "partial"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := &cobra.Command{Use: "gordon"}
			verb := &cobra.Command{Use: "deploy", RunE: func(*cobra.Command, []string) error { return tc.err }}
			root.AddCommand(verb)
			interruptedExits(root)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			verb.SetContext(ctx)
			err := verb.RunE(verb, nil)
			if tc.wantCode == 0 {
				require.NoError(t, err)
				return
			}
			var se cli.StatusError
			require.True(t, errors.As(err, &se), "%v", err)
			assert.Equal(t, tc.wantCode, se.StatusCode)
			assert.Contains(t, se.Status, map[bool]string{true: fail.Error(), false: "partial"}[tc.cancel])
		})
	}
}
