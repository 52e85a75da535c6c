//go:build gordoncomposehelper

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/gordon-deploy/docker-gordon/core/composeapi"
)

// loadCompose loads a compose project in the gordon-compose helper of this
// build (composeHelperExe): this build does not link the compose loader,
// whose package init every docker-gordon process would pay (package
// composeapi). The helper's result and refusals are the loader's.
func loadCompose(ctx context.Context, req composeapi.Request) (*composeapi.Result, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	exe, err := composeHelperExe(self)
	if err != nil {
		return nil, err
	}
	return composeapi.Exec(ctx, exe, req, os.Stderr)
}
