package sdk

import (
	"os"
	"syscall"
)

// pluginSysProcAttr makes the kernel SIGKILL a plugin when the host dies,
// even by kill -9 (ARCHITECTURE §1). Pdeathsig fires when the thread that
// forked the plugin exits; the Go runtime does not retire its threads
// unless a goroutine exits while locked to one, which the host never does.
//
// Each plugin leads a process group of its own: a terminal's Ctrl-C reaches
// the CLI only (which then cleans up through its plugins before it exits),
// and killProcessGroup ends the plugin with every process it started.
func pluginSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// killProcessGroup SIGKILLs the process group p leads (pluginSysProcAttr),
// so a plugin's children (a script's sleep) go with it; p itself is killed
// too when the group is already gone.
func killProcessGroup(p *os.Process) error {
	gerr := syscall.Kill(-p.Pid, syscall.SIGKILL)
	if err := p.Kill(); err != nil && gerr != nil {
		return err
	}
	return nil
}
