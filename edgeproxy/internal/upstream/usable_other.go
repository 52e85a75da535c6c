//go:build !unix

package upstream

// usable cannot check on this platform.
func (fc *Conn) usable() bool { return true }
