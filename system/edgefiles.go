package system

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// The edge's files that the system plane reads or prepares, so that the
// CLI names none of them.

// EnsureCertsDir creates <state>/edge/certs (mode 0700) before the edge
// runs, so its owner is the operator, not the edge container's user.
func EnsureCertsDir(stateDir string) error {
	return os.MkdirAll(certstore.Root(stateDir), 0o700)
}

// EdgeAccessLog is the access log destination the edge serving stateDir
// reports in its status file: "stdout", an absolute file path, or "off"
// (the edge reports none). ok is false when no running edge has reported
// (no status file, or one without a process).
func EdgeAccessLog(stateDir string) (dest string, ok bool) {
	data, err := os.ReadFile(filepath.Join(stateDir, "edge", edgestate.StatusFile))
	if err != nil {
		return "", false
	}
	var st routetable.Status
	if json.Unmarshal(data, &st) != nil || st.PID == 0 {
		return "", false
	}
	if st.AccessLog == "" {
		return "off", true
	}
	return st.AccessLog, true
}
