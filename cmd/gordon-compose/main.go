// Command gordon-compose is docker gordon's compose loader in a process of
// its own: docker-gordon built with -tags gordoncomposehelper (the
// Makefile's, install.sh's build) does not link core/compose, and runs this
// binary, installed beside it as gordon-compose-<build id>, when a verb is
// given a compose file. It reads one request (JSON) on stdin, loads the
// project exactly as the in-process loader does and writes the result or
// the project's problems (JSON) on stdout; compose-go's warnings go to
// stderr (package composeapi).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gordon-deploy/docker-gordon/core/compose"
	"github.com/gordon-deploy/docker-gordon/core/composeapi"
)

// version is stamped by the Makefile (-X main.version=…), as docker-gordon's.
var version = "dev"

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) != 2 || os.Args[1] != composeapi.HelperArg {
		fmt.Fprintf(os.Stderr, "gordon-compose %s is docker gordon's compose loader; docker gordon runs it. Run `docker gordon deploy -f compose.yaml` (or validate, convert) instead.\n", version)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := compose.Serve(ctx, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gordon-compose:", err)
		return 1
	}
	return 0
}
