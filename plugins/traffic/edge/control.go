package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/control"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// On a swarm with split control credentials (<state>/edge/control.json)
// the edges' admin addresses serve TLS with a certificate the control CA
// issued: every call pins that CA and carries the push token. A task
// started from the edge service's Docker secret holds only the baked
// credentials: a push refused with the current token (401) is retried
// with the older ones, and the first that works also brings the task's
// credentials up to date (PUT /control), so the next call uses the
// current token.

// tlsClients are the HTTP clients of one control CA.
type tlsClients struct {
	ca           string
	status, push *http.Client
}

var clientsMu sync.Mutex

// adminClients returns the scheme, the status and push clients and the
// control record: TLS clients pinning the control CA on a swarm that has
// one, else plain HTTP (one engine, or an edge from before split
// credentials) and ok false.
func (t *Traffic) adminClients() (scheme string, status, push *http.Client, ctl swarm.Control, ok bool) {
	if _, onSwarm, err := t.swarmConfig(); err != nil || !onSwarm {
		return "http://", t.client, t.pushClient, ctl, false
	}
	ctl, ok, err := swarm.LoadControl(t.stateDir)
	if err != nil || !ok {
		return "http://", t.client, t.pushClient, ctl, false
	}
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if t.tls == nil || t.tls.ca != ctl.CA {
		cfg, err := ctl.ClientTLS(control.EdgeServerName)
		if err != nil {
			return "http://", t.client, t.pushClient, ctl, false
		}
		t.tls = &tlsClients{ca: ctl.CA,
			status: &http.Client{Timeout: t.adminTimeout, Transport: &http.Transport{TLSClientConfig: cfg}},
			push:   &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}}
	}
	return "https://", t.tls.status, t.tls.push, ctl, true
}

// rekey sends the current credentials to the edge at base ("https://ip:port")
// with token, an older push token it accepted. 409 (it holds them or
// newer) is success.
func (t *Traffic) rekey(ctx context.Context, client *http.Client, base, token string, ctl swarm.Control) error {
	body, err := json.Marshal(ctl.Current())
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/control", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("PUT /control answered %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return nil
}
