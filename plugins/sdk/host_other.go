//go:build !linux

package sdk

import "syscall"

// pluginSysProcAttr: no parent-death signal outside Linux; Host.Close and
// go-plugin's managed-client cleanup end plugins instead.
func pluginSysProcAttr() *syscall.SysProcAttr { return nil }
