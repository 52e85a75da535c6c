// Command build-images builds the FROM-scratch test workload images into the
// local Docker engine and prints "name ref" per line:
//
//	go run ./test/testimages/cmd/build-images [-tag v1] [httpd tcpecho kv]
//
// With -tag the images bake ENV VERSION=<tag> and are tagged
// gordon-test/<name>:<tag>; with no names every workload is built.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"

	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

func main() {
	tag := flag.String("tag", "", "version baked in as ENV VERSION and added as image tag")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	refs, err := testimages.BuildVersion(ctx, *tag, flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(refs))
	for n := range refs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Println(n, refs[n])
	}
}
