//go:build !gordonfault

package faultstore

import "github.com/gordon-deploy/docker-gordon/core"

// Wrap returns s unchanged: the crash-injection hook exists only in
// test builds (-tags gordonfault, see fault_on.go), so a release binary
// pays nothing for it and ignores GORDON_FAULT.
func Wrap(s core.Store) core.Store { return s }

// AfterCreate returns nil: no crash hook outside test builds.
func AfterCreate(core.Store) func(string) { return nil }
