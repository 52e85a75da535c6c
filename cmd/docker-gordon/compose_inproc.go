//go:build !gordoncomposehelper

package main

import (
	"context"

	"github.com/gordon-deploy/docker-gordon/core/compose"
	"github.com/gordon-deploy/docker-gordon/core/composeapi"
)

// loadCompose loads a compose project in this process: a plain `go build`
// links the compose loader (the installed build runs it in the
// gordon-compose helper instead, compose_helper.go).
func loadCompose(ctx context.Context, req composeapi.Request) (*composeapi.Result, error) {
	return compose.LoadRequest(ctx, req)
}
