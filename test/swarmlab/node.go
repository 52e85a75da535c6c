package swarmlab

import (
	"fmt"
	"path/filepath"
)

// KillNode kills node i's (1-based) dockerd with SIGKILL, with its
// containerd, shims and containers: a node lost as by kill -9. Swarm marks
// it down after about 11 s. Down still cleans up after it.
func (l *Lab) KillNode(i int) error {
	n := l.Nodes[i-1]
	pid := readPid(filepath.Join(n.dir, "pid"))
	if pid <= 0 {
		return fmt.Errorf("swarmlab: node %s has no dockerd pid", n.Name)
	}
	killTree(pid)
	return nil
}
