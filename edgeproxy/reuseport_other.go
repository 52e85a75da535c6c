//go:build !linux

package edgeproxy

import "syscall"

func reusePortControl(_, _ string, _ syscall.RawConn) error { return nil }

const reusePortSupported = false
