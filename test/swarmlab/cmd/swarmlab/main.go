// Command swarmlab brings the test swarm lab up or down by hand (the e2e
// tests use package swarmlab directly):
//
//	go run ./test/swarmlab/cmd/swarmlab up [-nodes 3] [-managers]   # prints each node's DOCKER_HOST and IP
//	go run ./test/swarmlab/cmd/swarmlab down
//
// Reach node addresses from the lab namespace: nsenter --net=/var/run/netns/gsl-lab CMD.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gordon-deploy/docker-gordon/test/swarmlab"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: swarmlab up [-nodes N] [-managers] [-prefix P -subnet A.B.C] | swarmlab down [-nodes N] [-prefix P]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var o swarmlab.Options
	fs.IntVar(&o.Nodes, "nodes", 3, "node count (node 1 is the manager)")
	fs.BoolVar(&o.Managers, "managers", false, "join every node as a manager")
	fs.StringVar(&o.Prefix, "prefix", "gsl", "namespace and /tmp directory prefix")
	fs.StringVar(&o.Subnet, "subnet", "10.78.0", "the lab's /24, first three octets")
	_ = fs.Parse(os.Args[2:])
	o.Registry = true
	o.Log = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "swarmlab: "+f+"\n", a...) }
	if os.Args[1] == "down" {
		if err := swarmlab.Existing(o).Down(); err != nil {
			fmt.Fprintln(os.Stderr, "swarmlab: down:", err)
			os.Exit(1)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lab, err := swarmlab.Up(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, n := range lab.Nodes {
		fmt.Printf("N%d=%s IP%d=%s NS%d=%s\n", n.Index, n.Host, n.Index, n.IP, n.Index, n.NetNS)
	}
	fmt.Printf("REG=%s LABNS=%s\n", lab.Registry, lab.LabNS)
}
