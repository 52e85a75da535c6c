package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/docker/cli/cli/command"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// The status header names the last op by the verb that ran it: a
// rollback's deploy reads "rollback", as `ops` shows it (R69).
func TestStatus_HeaderNamesARollbackARollback(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	var out bytes.Buffer
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))), command.WithOutputStream(&out), command.WithErrorStream(io.Discard))
	require.NoError(t, err)
	env := &cliEnv{dockerCli: dcli}
	for _, c := range []struct{ kind, verb, want string }{
		{"deploy", "rollback", "last op op-1 rollback rev-3 success"},
		{"deploy", "", "last op op-1 deploy rev-3 success"},
	} {
		out.Reset()
		renderStatus(env, engine.AppStatus{App: "shop", Desired: "rev-3",
			LastOp: &engine.OpSummary{ID: "op-1", Kind: c.kind, Verb: c.verb, Revision: "rev-3", Outcome: core.OutcomeSuccess}})
		assert.Contains(t, out.String(), c.want)
	}
}
