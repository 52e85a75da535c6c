//go:build !gordonfault

package main

import "github.com/gordon-deploy/docker-gordon/core"

// faultStore returns s unchanged: the crash-injection hook exists only in
// test builds (-tags gordonfault, see fault_on.go), so a release binary
// pays nothing for it and ignores GORDON_FAULT.
func faultStore(s core.Store) core.Store { return s }

// faultAfterCreate returns nil: no crash hook outside test builds.
func faultAfterCreate(core.Store) func(string) { return nil }
