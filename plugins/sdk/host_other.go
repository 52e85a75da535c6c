//go:build !linux

package sdk

import (
	"os"
	"syscall"
)

// pluginSysProcAttr: no parent-death signal outside Linux; Host.Close and
// go-plugin's managed-client cleanup end plugins instead.
func pluginSysProcAttr() *syscall.SysProcAttr { return nil }

// killProcessGroup kills p (no process groups of plugins outside Linux).
func killProcessGroup(p *os.Process) error { return p.Kill() }
