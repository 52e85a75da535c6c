package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// On a swarm (<state>/swarm.json present) gordon-edge runs as a
// global service, one task per edge node, and no edge reads this state
// directory. Apply still writes routes.json here (the table of record, for
// reconcile and a restarted edge's peers), then PUTs the table to every
// running edge task's admin endpoint on the edge overlay and waits until
// each confirms it: a switch is complete only when every edge routes to
// the new generation, so no edge still sends requests to an instance the
// engine then drains and stops. Edge tasks that are not running yet (a
// node joining, a task restarting) take the table from their peers.

// swarmEdges is what the swarm publisher needs from the engine API.
type swarmEdges interface {
	edges(ctx context.Context, cfg swarm.Config) ([]swarm.EdgeTask, error)
}

// apiEdges lists the edge tasks through the manager's API (DOCKER_HOST).
type apiEdges struct {
	once sync.Once
	cli  *client.Client
	err  error
}

func (a *apiEdges) edges(ctx context.Context, cfg swarm.Config) ([]swarm.EdgeTask, error) {
	a.once.Do(func() { a.cli, a.err = client.New(client.FromEnv) })
	if a.err != nil {
		return nil, a.err
	}
	return swarm.EdgeTasks(ctx, a.cli, cfg.Service, cfg.Network)
}

// swarmConfig is the state directory's swarm configuration (ok false: one
// engine).
func (t *Traffic) swarmConfig() (swarm.Config, bool, error) {
	return swarm.Load(t.stateDir)
}

// targets are the edge tasks a table is pushed to: running, on a ready
// node, with an address on the overlay. No such task is
// core.ErrUnavailable.
func (t *Traffic) targets(ctx context.Context, cfg swarm.Config) ([]swarm.EdgeTask, error) {
	all, err := t.swarm.edges(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("traffic/edge: the swarm edge's tasks: %w: %w", core.ErrUnavailable, err)
	}
	var out []swarm.EdgeTask
	for _, e := range all {
		if e.Running() && e.NodeReady && e.IP != "" {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("traffic/edge: no task of the edge service %s runs on a ready node (docker service ps %s; docker gordon system start): %w",
			cfg.Service, cfg.Service, core.ErrUnavailable)
	}
	return out, nil
}

// pushSwarm PUTs table to every target edge task concurrently and waits
// until each has applied it (or a later generation), until deadline.
// Errors: an edge rejected the table → core.ErrInvalid with its reason;
// an edge did not confirm by the deadline → core.ErrUnavailable naming
// the node and the last answer.
func (t *Traffic) pushSwarm(ctx context.Context, cfg swarm.Config, edges []swarm.EdgeTask, table routetable.Table, deadline time.Time) error {
	token, err := swarm.Token(t.stateDir)
	if err != nil {
		return fmt.Errorf("traffic/edge: %w", err)
	}
	tokens := []string{token}
	if _, _, _, ctl, ok := t.adminClients(); ok {
		tokens = ctl.PushTokens()
	}
	body, err := json.Marshal(table)
	if err != nil {
		return fmt.Errorf("traffic/edge: encode route table generation %d: %w: %w", table.Generation, core.ErrInvalid, err)
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	errs := make([]error, len(edges))
	var wg sync.WaitGroup
	for i, e := range edges {
		wg.Go(func() { errs[i] = t.pushOne(dctx, cfg, e, tokens, body, table) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// swarmGeneration is the highest generation any of edges reports
// applied or rejected (0 when none answers within the admin timeout),
// leaving out a report far ahead of own, the table of record's generation
// (routetable.FarAhead: no table published from here gets there, and
// counting it would make the next generation wrap).
func (t *Traffic) swarmGeneration(ctx context.Context, cfg swarm.Config, edges []swarm.EdgeTask, own uint64) uint64 {
	gens := make([]uint64, len(edges))
	var wg sync.WaitGroup
	for i, e := range edges {
		wg.Go(func() {
			if st, err := t.fetchLive(ctx, net.JoinHostPort(e.IP, strconv.Itoa(cfg.AdminPort))); err == nil {
				gens[i] = max(st.AppliedGeneration, st.RejectedGeneration)
			}
		})
	}
	wg.Wait()
	var gen uint64
	for _, g := range gens {
		if !routetable.FarAhead(g, own) {
			gen = max(gen, g)
		}
	}
	return gen
}

// pushOne PUTs the table to one edge task, retrying transient failures
// (connection refused while the task starts, a timeout) every poll
// interval until ctx ends.
func (t *Traffic) pushOne(ctx context.Context, cfg swarm.Config, e swarm.EdgeTask, tokens []string, body []byte, table routetable.Table) error {
	scheme, _, client, ctl, split := t.adminClients()
	base := scheme + net.JoinHostPort(e.IP, strconv.Itoa(cfg.AdminPort))
	url := base + "/routes"
	where := fmt.Sprintf("the edge on node %s (task %s, %s)", e.NodeName, short(e.ID), e.IP)
	var last string
	try := 0
	for {
		st, code, msg, err := t.putRoutes(ctx, client, url, tokens[try], body)
		if code == http.StatusUnauthorized && try+1 < len(tokens) {
			try++ // a task that holds older credentials (the baked ones)
			continue
		}
		if split && try > 0 && err == nil && code != http.StatusUnauthorized {
			if rerr := t.rekey(ctx, client, base, tokens[try], ctl); rerr == nil {
				try = 0
			}
		}
		switch {
		case err != nil:
			last = err.Error()
		case code == http.StatusOK || code == http.StatusConflict:
			if st.AppliedGeneration == table.Generation {
				return listenerErr(st, table)
			}
			if st.Error != "" && st.RejectedGeneration == table.Generation {
				return fmt.Errorf("traffic/edge: %s rejected generation %d: %w: %s", where, table.Generation, core.ErrInvalid, st.Error)
			}
			if st.AppliedGeneration > table.Generation {
				// Never success: that edge serves a table not published
				// from here (another state directory, or a generation
				// forced far ahead) and keeps it.
				return fmt.Errorf("traffic/edge: %s serves generation %d, above this table's %d, so it keeps a table this state directory did not publish: restart that task (docker service update --force %s) and run the command again: %w",
					where, st.AppliedGeneration, table.Generation, cfg.Service, core.ErrConflict)
			}
			last = fmt.Sprintf("answered %d with applied generation %d", code, st.AppliedGeneration)
		case code == http.StatusUnprocessableEntity:
			return fmt.Errorf("traffic/edge: %s refused generation %d: %w: %s", where, table.Generation, core.ErrInvalid, msg)
		case code == http.StatusUnauthorized:
			return fmt.Errorf("traffic/edge: %s refused the route-push token (401): the edge service and %s disagree; run docker gordon system start again: %w",
				where, swarm.TokenFile, core.ErrConflict)
		default:
			last = fmt.Sprintf("answered %d", code)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("traffic/edge: %s did not apply generation %d in time: %s: %w", where, table.Generation, last, core.ErrUnavailable)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// putRoutes is one PUT /routes; st is the edge's status answer, msg the
// answer's text when it is not a status (at most 200 bytes).
func (t *Traffic) putRoutes(ctx context.Context, client *http.Client, url, token string, body []byte) (st routetable.Status, code int, msg string, err error) {
	actx, cancel := context.WithTimeout(ctx, 3*t.adminTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return st, 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return st, 0, "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(data, &st) != nil {
		msg = strings.TrimSpace(string(data[:min(len(data), 200)]))
	}
	return st, resp.StatusCode, msg, nil
}

// swarmStatus is Status on a swarm: every running edge task's live
// status, combined. AppliedGeneration is the lowest any edge has applied
// (what every edge serves), Error the first edge's error, and each
// backend's counters are summed over the edges, so in-flight counts the
// engine's drain waits on cover every node. An edge that does not answer
// makes the result Stale with its node in Error.
func (t *Traffic) swarmStatus(ctx context.Context, cfg swarm.Config) (core.TrafficStatus, error) {
	edges, err := t.targets(ctx, cfg)
	if err != nil {
		return core.TrafficStatus{}, err
	}
	type answer struct {
		st  routetable.Status
		err error
	}
	answers := make([]answer, len(edges))
	var wg sync.WaitGroup
	for i, e := range edges {
		wg.Go(func() {
			st, err := t.fetchLive(ctx, net.JoinHostPort(e.IP, strconv.Itoa(cfg.AdminPort)))
			answers[i] = answer{st, err}
		})
	}
	wg.Wait()
	var out core.TrafficStatus
	sums := map[string]*routetable.BackendStatus{}
	var problems []string
	first := true
	for i, a := range answers {
		if a.err != nil {
			out.Stale = true
			problems = append(problems, fmt.Sprintf("node %s: %v", edges[i].NodeName, a.err))
			continue
		}
		if first || a.st.AppliedGeneration < out.AppliedGeneration {
			out.AppliedGeneration = a.st.AppliedGeneration
		}
		first = false
		if a.st.Error != "" {
			problems = append(problems, fmt.Sprintf("node %s: %s", edges[i].NodeName, a.st.Error))
		}
		for _, b := range a.st.Backends {
			s := sums[b.Addr]
			if s == nil {
				s = &routetable.BackendStatus{Addr: b.Addr}
				sums[b.Addr] = s
			}
			s.InFlight += b.InFlight
			s.OpenConns += b.OpenConns
			s.Requests += b.Requests
			s.Errors += b.Errors
			if b.EjectedUntil.After(s.EjectedUntil) {
				s.EjectedUntil, s.EjectReason = b.EjectedUntil, b.EjectReason
			}
		}
		if len(out.Listeners) == 0 {
			out.Listeners = a.st.Listeners
		}
	}
	for _, s := range sums {
		out.Backends = append(out.Backends, *s)
	}
	sort.Slice(out.Backends, func(i, j int) bool { return out.Backends[i].Addr < out.Backends[j].Addr })
	out.Error = strings.Join(problems, "; ")
	out.RetiredBackends = t.retired(out.Backends)
	return out, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// swarmLagging is nil when every running edge task has applied the
// generation of the table of record (routes.json), else an error wrapping
// core.ErrUnavailable that names the lag.
func (t *Traffic) swarmLagging(ctx context.Context, cfg swarm.Config) error {
	data, err := os.ReadFile(filepath.Join(t.dir, routesFile))
	if err != nil {
		return fmt.Errorf("traffic/edge: table of record: %w: %w", core.ErrUnavailable, err)
	}
	var tbl routetable.Table
	if err := json.Unmarshal(data, &tbl); err != nil {
		return fmt.Errorf("traffic/edge: table of record: %w: %w", core.ErrUnavailable, err)
	}
	st, err := t.swarmStatus(ctx, cfg)
	if err != nil {
		return err
	}
	if st.Stale || st.AppliedGeneration < tbl.Generation {
		return fmt.Errorf("traffic/edge: the edges have applied generation %d of %d (%s): %w", st.AppliedGeneration, tbl.Generation, st.Error, core.ErrUnavailable)
	}
	return nil
}
