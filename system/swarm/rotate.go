package swarm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/control"
)

// RotateResult is what Rotate did.
type RotateResult struct {
	// Generation is the credentials' generation now; Edges the edge tasks
	// that hold it.
	Generation uint64 `json:"generation"`
	Edges      int    `json:"edges"`
	// Baked is the generation the edge service's Docker secret holds (a
	// task started from it is brought up to date at its first push).
	Baked uint64 `json:"baked"`
}

// Rotate replaces the push token and the edge token of a swarm's control
// channel without replacing an edge task, so no request is dropped:
//
//  1. new tokens are recorded with the old ones still accepted (the
//     certificate storage takes either edge token from then on), and
//     every running edge task is sent credentials accepting both and
//     sending the new edge token (PUT /control, with the old push token);
//  2. once every task holds them, the old tokens are dropped from the
//     record and from every task (PUT /control, with the new push token).
//
// A task that cannot be reached in step 1 stops the rotation before step
// 2 (the record then accepts both: running it again finishes). The
// manager-only record secret is renewed; the edge service's secret is
// not (the next system start bakes the new tokens in).
func Rotate(ctx context.Context, api client.APIClient, stateDir string, cfg Config) (RotateResult, error) {
	ctl, ok, err := LoadControl(stateDir)
	if err != nil {
		return RotateResult{}, err
	}
	if !ok {
		return RotateResult{}, fmt.Errorf("this swarm's edge has no split control credentials yet: run docker gordon system start first: %w", core.ErrInvalid)
	}
	tasks, err := EdgeTasks(ctx, api, cfg.Service, cfg.Network)
	if err != nil {
		return RotateResult{}, err
	}
	hc, err := rotateClient(ctl)
	if err != nil {
		return RotateResult{}, err
	}
	both := ctl
	both.Generation++
	both.PushPrev, both.EdgePrev = appendNew(ctl.PushPrev, ctl.Push), appendNew(ctl.EdgePrev, ctl.Edge)
	both.Push, both.Edge = randomToken(), randomToken()
	if err := SaveControl(stateDir, both); err != nil {
		return RotateResult{}, err
	}
	if err := sendEach(ctx, hc, tasks, cfg.AdminPort, ctl.PushTokens(), both.Current()); err != nil {
		return RotateResult{Generation: both.Generation, Baked: both.Baked.Generation}, fmt.Errorf("%w; the new tokens are recorded with the old ones still accepted: run docker gordon system rotate-token again to finish", err)
	}
	only := both
	only.Generation++
	only.PushPrev, only.EdgePrev = nil, nil
	if err := SaveControl(stateDir, only); err != nil {
		return RotateResult{}, err
	}
	if err := sendEach(ctx, hc, tasks, cfg.AdminPort, []string{only.Push}, only.Current()); err != nil {
		return RotateResult{Generation: only.Generation, Baked: only.Baked.Generation}, err
	}
	if err := EnsureRecordSecret(ctx, api, only, cfg.StateID); err != nil {
		return RotateResult{}, err
	}
	return RotateResult{Generation: only.Generation, Edges: len(tasks), Baked: only.Baked.Generation}, nil
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(append([]string(nil), list...), s)
}

func rotateClient(ctl Control) (*http.Client, error) {
	cfg, err := ctl.ClientTLS(control.EdgeServerName)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// sendEach sends creds to every running edge task (PUT /control), with
// the first of tokens the task accepts. Every task must take them (200,
// or 409: it holds them or newer).
func sendEach(ctx context.Context, hc *http.Client, tasks []EdgeTask, port int, tokens []string, creds control.Credentials) error {
	body, err := json.Marshal(creds)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, t := range tasks {
		if !t.Running() || t.IP == "" {
			continue
		}
		wg.Go(func() {
			if err := sendOne(ctx, hc, "https://"+net.JoinHostPort(t.IP, strconv.Itoa(port))+"/control", tokens, body); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("the edge on node %s (%s): %w", t.NodeName, t.IP, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func sendOne(ctx context.Context, hc *http.Client, url string, tokens []string, body []byte) error {
	var last string
	for _, tok := range tokens {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("%w: %w", core.ErrUnavailable, err)
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK, http.StatusConflict:
			return nil
		case http.StatusUnauthorized:
			last = "refused every push token the record has (401)"
			continue
		}
		return fmt.Errorf("PUT /control answered %d: %s: %w", resp.StatusCode, strings.TrimSpace(string(msg)), core.ErrUnavailable)
	}
	return fmt.Errorf("%s: %w", last, core.ErrConflict)
}
