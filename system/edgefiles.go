package system

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"

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
		return AccessLogOff, true
	}
	return st.AccessLog, true
}

// EdgeMetrics returns the /metrics text (Prometheus format) of the edge
// serving stateDir, asked at the admin address its status file names with
// its admin token, within one second. It is an error wrapping
// core.ErrUnavailable when no edge has reported or it does not answer.
func EdgeMetrics(ctx context.Context, stateDir string) ([]byte, error) {
	dir := filepath.Join(stateDir, "edge")
	data, err := os.ReadFile(filepath.Join(dir, edgestate.StatusFile))
	var st routetable.Status
	if err != nil || json.Unmarshal(data, &st) != nil || st.AdminAddr == "" {
		return nil, fmt.Errorf("the edge has not reported an admin address (is it running? docker gordon edge status): %w", core.ErrUnavailable)
	}
	tok, err := edgestate.ReadAdminToken(dir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+st.AdminAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the edge does not answer on its admin address %s (docker gordon edge status): %w", st.AdminAddr, core.ErrUnavailable)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the edge's admin address %s answered %s to GET /metrics: %w", st.AdminAddr, resp.Status, core.ErrUnavailable)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 16<<20))
}

// EdgeCerts lists the HTTPS certificates of the edge serving stateDir,
// sorted by host, as `certs ls` shows them through the traffic backend;
// read here from the edge's certificate store without starting it.
func EdgeCerts(stateDir string) ([]core.CertInfo, error) {
	list, err := certstore.List(stateDir, time.Now())
	if err != nil {
		return nil, fmt.Errorf("list the edge's certificates: %w", err)
	}
	out := make([]core.CertInfo, len(list))
	for i, in := range list {
		out[i] = core.CertInfo(in)
	}
	return out, nil
}
