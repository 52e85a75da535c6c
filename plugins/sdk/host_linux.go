package sdk

import "syscall"

// pluginSysProcAttr makes the kernel SIGKILL a plugin when the host dies,
// even by kill -9 (ARCHITECTURE §1). Pdeathsig fires when the thread that
// forked the plugin exits; the Go runtime does not retire its threads
// unless a goroutine exits while locked to one, which the host never does.
func pluginSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
