package coretest

import (
	"context"
	"errors"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// StoreSuite is the conformance suite of core.Store (STYLE "What we take"
// 8): every implementation (the file journal, the in-memory store) runs it.
// newStore must return an empty store; each subtest gets its own. The suite
// relies only on the core.Store contract, never on files.
func StoreSuite(t *testing.T, newStore func(t *testing.T) core.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s core.Store)
	}{
		{"Recover_EmptyStore", storeRecoverEmpty},
		{"Apps_EnsureLoadList", storeApps},
		{"Revisions_ImmutableAndNext", storeRevisions},
		{"Desired_NotFoundThenReplace", storeDesired},
		{"Active_NotFoundThenReplace", storeActive},
		{"Intent_AbsentIsRunning", storeIntent},
		{"R6_ClaimOpAndLatest", storeClaimOp},
		{"R6_ClaimOpReplayByKey", storeClaimOpReplay},
		{"Decision6_MarkersOrderedAndReplaced", storeMarkers},
		{"Claims_RegisterReplaceRelease", storeClaims},
		{"Ownership_NotFoundThenReplace", storeOwnership},
		{"Decision3_RecoveryAbsentIsEmpty", storeRecovery},
		{"R55_EndIncarnation", storeEndIncarnation},
		{"Decision13_Secrets", storeSecrets},
		{"Decision13_ContainerSecrets", storeContainerSecrets},
		{"R1_LockExclusiveAndTry", storeLock},
		{"R1_LockWaitsForRelease", storeLockWaits},
		{"Retention_Prune", storePrune},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// suiteT0 is the SPEC test start time T0 (2026-09-10 12:00:00 UTC).
var suiteT0 = time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)

func suiteCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func storeRecoverEmpty(t *testing.T, s core.Store) {
	require.NoError(t, s.Recover(suiteCtx(t)))
}

func storeApps(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	apps, err := s.ListApps(ctx)
	require.NoError(t, err)
	assert.Empty(t, apps)

	_, err = s.LoadApp(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound)

	blog, err := s.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "blog", blog.Name)
	assert.NotEmpty(t, blog.Incarnation)

	again, err := s.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, blog.Incarnation, again.Incarnation, "EnsureApp keeps the existing incarnation")

	loaded, err := s.LoadApp(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, blog.Incarnation, loaded.Incarnation)
	assert.Equal(t, "blog", loaded.Name)

	shop, err := s.EnsureApp(ctx, "api")
	require.NoError(t, err)
	assert.NotEqual(t, blog.Incarnation, shop.Incarnation, "incarnations are unique")

	apps, err = s.ListApps(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"api", "blog"}, apps)
}

func suiteRevision(app, id string, createdAt time.Time, image string) core.Revision {
	return core.Revision{
		ID:  id,
		App: app,
		Spec: core.AppSpec{
			Name:     app,
			Env:      map[string]string{"MODE": "prod"},
			Services: []core.ServiceSpec{{Name: "web", Image: image, StopGrace: core.Duration(5 * time.Second)}},
		},
		SourceSHA256: "0f00",
		CreatedAt:    createdAt,
	}
}

func storeRevisions(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	_, err := s.LoadRevision(ctx, "blog", "rev-1")
	require.ErrorIs(t, err, core.ErrNotFound)
	revs, err := s.ListRevisions(ctx, "blog")
	require.NoError(t, err)
	assert.Empty(t, revs)

	id1, err := s.NextRevisionID(ctx, "blog")
	require.NoError(t, err)
	require.NotEmpty(t, id1)
	r1 := suiteRevision("blog", id1, suiteT0, "blog:1")
	require.NoError(t, s.SaveRevision(ctx, r1))

	got, err := s.LoadRevision(ctx, "blog", id1)
	require.NoError(t, err)
	assert.Equal(t, r1, got)

	// Same content again is fine; different content under the same id is a
	// conflict and the stored revision is unchanged.
	require.NoError(t, s.SaveRevision(ctx, r1))
	err = s.SaveRevision(ctx, suiteRevision("blog", id1, suiteT0, "blog:CHANGED"))
	require.ErrorIs(t, err, core.ErrConflict)
	got, err = s.LoadRevision(ctx, "blog", id1)
	require.NoError(t, err)
	assert.Equal(t, "blog:1", got.Spec.Services[0].Image)

	id2, err := s.NextRevisionID(ctx, "blog")
	require.NoError(t, err)
	assert.NotEqual(t, id1, id2, "NextRevisionID returns a new id")
	r2 := suiteRevision("blog", id2, suiteT0.Add(time.Minute), "blog:2")
	require.NoError(t, s.SaveRevision(ctx, r2))

	revs, err = s.ListRevisions(ctx, "blog")
	require.NoError(t, err)
	require.Len(t, revs, 2)
	assert.Equal(t, []string{id1, id2}, []string{revs[0].ID, revs[1].ID})

	// Revisions are per app.
	_, err = s.LoadRevision(ctx, "other", id1)
	require.ErrorIs(t, err, core.ErrNotFound)
}

func storeDesired(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	_, err := s.LoadDesired(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound)
	require.NoError(t, s.SaveDesired(ctx, "blog", "rev-1"))
	got, err := s.LoadDesired(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "rev-1", got)
	require.NoError(t, s.SaveDesired(ctx, "blog", "rev-2"))
	got, err = s.LoadDesired(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "rev-2", got)
	_, err = s.LoadDesired(ctx, "other")
	require.ErrorIs(t, err, core.ErrNotFound)
}

func suiteActive(container string) core.Active {
	return core.Active{
		App:               "blog",
		Converged:         true,
		ConvergedRevision: "rev-1",
		Networks:          []string{"gordon-blog"},
		Services: map[string]*core.ActiveService{
			"web": {
				EffectiveRevision: "rev-1",
				ActivatedBy:       "op-1",
				ActivatedAt:       suiteT0,
				Image:             "blog@sha256:aa",
				Digest:            "sha256:aa",
				Container:         container,
				Spec:              core.ServiceSpec{Name: "web", Image: "blog:1"},
				BackendBinds:      map[int]int{8080: 18080},
			},
		},
	}
}

func storeActive(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	_, err := s.LoadActive(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound)

	a := suiteActive("c-old")
	require.NoError(t, s.SaveActive(ctx, a))
	got, err := s.LoadActive(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, a, got)

	// Mutating the saved value afterwards does not change the store.
	a.Services["web"].Container = "c-mutated"
	got, err = s.LoadActive(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "c-old", got.Services["web"].Container)

	b := suiteActive("c-new")
	b.Services["worker"] = &core.ActiveService{EffectiveRevision: "rev-2", Container: "c-w"}
	require.NoError(t, s.SaveActive(ctx, b))
	got, err = s.LoadActive(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "c-new", got.Services["web"].Container)
	assert.Len(t, got.Services, 2, "saving replaces the whole record")
}

func storeIntent(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	in, err := s.LoadIntent(ctx, "blog")
	require.NoError(t, err)
	assert.False(t, in.Stopped)
	want := core.Intent{Stopped: true, UpdatedBy: "op-stop", UpdatedAt: suiteT0}
	require.NoError(t, s.SaveIntent(ctx, "blog", want))
	in, err = s.LoadIntent(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, want, in)
	require.NoError(t, s.SaveIntent(ctx, "blog", core.Intent{UpdatedBy: "op-start", UpdatedAt: suiteT0.Add(time.Second)}))
	in, err = s.LoadIntent(ctx, "blog")
	require.NoError(t, err)
	assert.False(t, in.Stopped)
}

func suiteOp(id, key string, startedAt time.Time) core.Operation {
	return core.Operation{
		ID:          id,
		Kind:        core.OpDeploy,
		App:         "blog",
		Key:         key,
		Fingerprint: "fp-" + id,
		Revision:    "rev-1",
		StartedAt:   startedAt,
		Steps:       []core.Step{{ID: "preflight", State: core.StepPending}},
	}
}

func storeClaimOp(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	_, err := s.LatestOp(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound)
	_, err = s.LoadOp(ctx, "blog", "op-1")
	require.ErrorIs(t, err, core.ErrNotFound)
	ops, err := s.ListOps(ctx, "blog")
	require.NoError(t, err)
	assert.Empty(t, ops)

	op1 := suiteOp("op-1", "", suiteT0)
	stored, claimed, err := s.ClaimOp(ctx, op1)
	require.NoError(t, err)
	assert.True(t, claimed)
	assert.Equal(t, op1, stored)
	latest, err := s.LatestOp(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, op1, latest)

	op2 := suiteOp("op-2", "", suiteT0.Add(time.Minute))
	_, claimed, err = s.ClaimOp(ctx, op2)
	require.NoError(t, err)
	assert.True(t, claimed)
	latest, err = s.LatestOp(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "op-2", latest.ID, "the latest claim becomes LatestOp")

	// SaveOp replaces the journal of op-1 without making it latest.
	op1.Outcome = core.OutcomeSuccess
	op1.FinishedAt = suiteT0.Add(30 * time.Second)
	op1.Steps[0].State = core.StepSucceeded
	op1.Warnings = []core.Warning{{Service: "web", Leftover: "c-old", Detail: "not removed"}}
	require.NoError(t, s.SaveOp(ctx, op1))
	got, err := s.LoadOp(ctx, "blog", "op-1")
	require.NoError(t, err)
	assert.Equal(t, op1, got)
	assert.True(t, got.Terminal())
	latest, err = s.LatestOp(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "op-2", latest.ID)

	ops, err = s.ListOps(ctx, "blog")
	require.NoError(t, err)
	require.Len(t, ops, 2)
	assert.Equal(t, []string{"op-1", "op-2"}, []string{ops[0].ID, ops[1].ID}, "oldest first")

	// Ops are per app.
	_, err = s.LatestOp(ctx, "other")
	require.ErrorIs(t, err, core.ErrNotFound)
	_, err = s.LoadOp(ctx, "other", "op-1")
	require.ErrorIs(t, err, core.ErrNotFound)
}

func storeClaimOpReplay(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	first := suiteOp("op-a", "key-deploy", suiteT0)
	stored, claimed, err := s.ClaimOp(ctx, first)
	require.NoError(t, err)
	require.True(t, claimed)
	assert.Equal(t, first, stored)

	first.Outcome = core.OutcomeFailed
	first.Steps[0].State = core.StepFailed
	require.NoError(t, s.SaveOp(ctx, first))

	// A replay with the same key gets the stored journal (with its updates),
	// not the new request, and claims nothing.
	replay := suiteOp("op-b", "key-deploy", suiteT0.Add(time.Minute))
	replay.Fingerprint = "fp-different"
	stored, claimed, err = s.ClaimOp(ctx, replay)
	require.NoError(t, err)
	assert.False(t, claimed)
	assert.Equal(t, first, stored)
	_, err = s.LoadOp(ctx, "blog", "op-b")
	require.ErrorIs(t, err, core.ErrNotFound, "a replay persists nothing")
	latest, err := s.LatestOp(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "op-a", latest.ID)
	ops, err := s.ListOps(ctx, "blog")
	require.NoError(t, err)
	assert.Len(t, ops, 1)

	// A different key claims a new op.
	other := suiteOp("op-c", "key-other", suiteT0.Add(2*time.Minute))
	_, claimed, err = s.ClaimOp(ctx, other)
	require.NoError(t, err)
	assert.True(t, claimed)
	latest, err = s.LatestOp(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "op-c", latest.ID)

	// Keys are scoped per app.
	api := suiteOp("op-d", "key-deploy", suiteT0)
	api.App = "api"
	stored, claimed, err = s.ClaimOp(ctx, api)
	require.NoError(t, err)
	assert.True(t, claimed)
	assert.Equal(t, "op-d", stored.ID)
}

func storeMarkers(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	ms, err := s.LoadMarkers(ctx, "blog")
	require.NoError(t, err)
	assert.Empty(t, ms)

	late := core.Marker{App: "blog", Service: "web", Container: "c-a", Reason: core.MarkerRetirementPending, CreatedAt: suiteT0.Add(time.Minute), StopGrace: core.Duration(time.Second)}
	earlyB := core.Marker{App: "blog", Service: "web", Container: "c-b", Reason: core.MarkerRetirementPending, Operation: "op-1", CreatedAt: suiteT0}
	earlyA := core.Marker{App: "blog", Service: "db", Container: "c-0", Reason: core.MarkerReplacementPending, CreatedAt: suiteT0}
	for _, m := range []core.Marker{late, earlyB, earlyA} {
		require.NoError(t, s.SaveMarker(ctx, m))
	}
	ms, err = s.LoadMarkers(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, []core.Marker{earlyA, earlyB, late}, ms, "creation time, then container ID")

	// Saving the same key replaces, whatever the reason.
	removed := earlyB
	removed.Reason = core.MarkerRemoved
	require.NoError(t, s.SaveMarker(ctx, removed))
	ms, err = s.LoadMarkers(ctx, "blog")
	require.NoError(t, err)
	require.Len(t, ms, 3)
	assert.Equal(t, core.MarkerRemoved, ms[1].Reason)

	require.NoError(t, s.ClearMarker(ctx, "blog", "web", "c-b"))
	require.NoError(t, s.ClearMarker(ctx, "blog", "web", "c-b"), "clearing an absent marker succeeds")
	require.NoError(t, s.ClearMarker(ctx, "blog", "web", "c-0"), "the key includes the service")
	ms, err = s.LoadMarkers(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, []core.Marker{earlyA, late}, ms)

	other, err := s.LoadMarkers(ctx, "other")
	require.NoError(t, err)
	assert.Empty(t, other, "markers are per app")
}

func storeClaims(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	cs, err := s.ListClaims(ctx)
	require.NoError(t, err)
	assert.Empty(t, cs)

	c1 := core.Claim{Port: 18080, Protocol: "tcp", Owner: core.ClaimOwnerBackend, App: "blog", Container: "c-old"}
	c2 := core.Claim{Port: 18081, Protocol: "tcp", Owner: core.ClaimOwnerBackend, App: "blog", Container: "c-old"}
	c3 := core.Claim{Port: 18090, Protocol: "udp", Owner: core.ClaimOwnerBackend, App: "api", Container: "c-api"}
	require.NoError(t, s.RegisterClaims(ctx, []core.Claim{c1, c2}))
	require.NoError(t, s.RegisterClaims(ctx, []core.Claim{c3}))
	cs, err = s.ListClaims(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []core.Claim{c1, c2, c3}, cs)

	// Re-registering a port replaces its claim.
	moved := c2
	moved.Container = "c-new"
	require.NoError(t, s.RegisterClaims(ctx, []core.Claim{moved}))
	cs, err = s.ListClaims(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []core.Claim{c1, moved, c3}, cs)

	require.NoError(t, s.ReleaseClaims(ctx, "blog", "c-old"))
	cs, err = s.ListClaims(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []core.Claim{moved, c3}, cs)
	require.NoError(t, s.ReleaseClaims(ctx, "blog", "c-none"), "no claims is no error")
	require.NoError(t, s.ReleaseClaims(ctx, "blog", "c-api"), "the app scopes the release")
	cs, err = s.ListClaims(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []core.Claim{moved, c3}, cs)
}

func storeOwnership(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	_, err := s.LoadOwnership(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound)
	o := core.Ownership{App: "blog", Incarnation: "inc-1", Volumes: []string{"data"}, Secrets: []string{"db-pass"}, SingleWriter: map[string]bool{"db": true}}
	require.NoError(t, s.SaveOwnership(ctx, o))
	got, err := s.LoadOwnership(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, o, got)
	o.Volumes = append(o.Volumes, "cache")
	require.NoError(t, s.SaveOwnership(ctx, o))
	got, err = s.LoadOwnership(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, []string{"data", "cache"}, got.Volumes)
}

func storeRecovery(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	r, err := s.LoadRecovery(ctx, "blog")
	require.NoError(t, err)
	assert.Empty(t, r.Verified)
	assert.Empty(t, r.PendingWithdrawals)
	assert.Empty(t, r.CrashLoop)
	want := core.Recovery{
		Verified:           map[string]core.VerifiedExecution{"web": {Container: "c-1", StartedAt: suiteT0}},
		PendingWithdrawals: map[string]bool{"db": true},
		CrashLoop:          map[string]core.CrashLoop{"worker": {Container: "c-w", Attempts: 3, LastAttempt: suiteT0}},
	}
	require.NoError(t, s.SaveRecovery(ctx, "blog", want))
	r, err = s.LoadRecovery(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, want, r)
}

func storeEndIncarnation(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	info, err := s.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	rev := suiteRevision("blog", "rev-1", suiteT0, "blog:1")
	require.NoError(t, s.SaveRevision(ctx, rev))
	require.NoError(t, s.SaveDesired(ctx, "blog", "rev-1"))
	require.NoError(t, s.SaveActive(ctx, suiteActive("c-1")))
	require.NoError(t, s.SaveIntent(ctx, "blog", core.Intent{Stopped: true, UpdatedAt: suiteT0}))
	require.NoError(t, s.SaveMarker(ctx, core.Marker{App: "blog", Service: "web", Container: "c-1", Reason: core.MarkerRemoved, CreatedAt: suiteT0}))
	require.NoError(t, s.SaveRecovery(ctx, "blog", core.Recovery{PendingWithdrawals: map[string]bool{"web": true}}))
	require.NoError(t, s.SaveOwnership(ctx, core.Ownership{App: "blog", Incarnation: info.Incarnation, Volumes: []string{"data"}}))
	require.NoError(t, s.SetSecret(ctx, "blog", "web", "token", []byte("s3cret")))
	op := suiteOp("op-rm", "", suiteT0)
	op.Kind = core.OpRemove
	_, _, err = s.ClaimOp(ctx, op)
	require.NoError(t, err)

	require.NoError(t, s.EndIncarnation(ctx, "blog"))

	_, err = s.LoadApp(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound)
	apps, err := s.ListApps(ctx)
	require.NoError(t, err)
	assert.NotContains(t, apps, "blog")
	_, err = s.LoadDesired(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound)
	_, err = s.LoadActive(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound)
	in, err := s.LoadIntent(ctx, "blog")
	require.NoError(t, err)
	assert.False(t, in.Stopped)
	ms, err := s.LoadMarkers(ctx, "blog")
	require.NoError(t, err)
	assert.Empty(t, ms)
	r, err := s.LoadRecovery(ctx, "blog")
	require.NoError(t, err)
	assert.Empty(t, r.PendingWithdrawals)
	_, err = s.LoadOwnership(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound, "ownership is archived under the old incarnation")

	// History is kept.
	gotRev, err := s.LoadRevision(ctx, "blog", "rev-1")
	require.NoError(t, err)
	assert.Equal(t, rev, gotRev)
	gotOp, err := s.LoadOp(ctx, "blog", "op-rm")
	require.NoError(t, err)
	assert.Equal(t, core.OpRemove, gotOp.Kind)

	// The name can be reused with a fresh incarnation that does not see the
	// old incarnation's secrets (they stay retained under the old id, R3).
	next, err := s.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	assert.NotEqual(t, info.Incarnation, next.Incarnation)
	_, err = s.GetSecret(ctx, "blog", "web", "token")
	require.ErrorIs(t, err, core.ErrNotFound)
}

func storeSecrets(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	_, err := s.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	names, err := s.ListSecrets(ctx, "blog", "web")
	require.NoError(t, err)
	assert.Empty(t, names)
	_, err = s.GetSecret(ctx, "blog", "web", "token")
	require.ErrorIs(t, err, core.ErrNotFound)

	require.NoError(t, s.SetSecret(ctx, "blog", "web", "token", []byte("v1")))
	require.NoError(t, s.SetSecret(ctx, "blog", "web", "api-key", []byte("k")))
	require.NoError(t, s.SetSecret(ctx, "blog", "db", "password", []byte("p")))
	v, err := s.GetSecret(ctx, "blog", "web", "token")
	require.NoError(t, err)
	assert.Equal(t, []byte("v1"), v)
	require.NoError(t, s.SetSecret(ctx, "blog", "web", "token", []byte("v2")))
	v, err = s.GetSecret(ctx, "blog", "web", "token")
	require.NoError(t, err)
	assert.Equal(t, []byte("v2"), v, "set replaces")

	names, err = s.ListSecrets(ctx, "blog", "web")
	require.NoError(t, err)
	assert.Equal(t, []string{"api-key", "token"}, names)
	assert.True(t, sort.StringsAreSorted(names))
	_, err = s.GetSecret(ctx, "blog", "db", "token")
	require.ErrorIs(t, err, core.ErrNotFound, "secrets are per service")

	require.NoError(t, s.RemoveSecret(ctx, "blog", "web", "token"))
	_, err = s.GetSecret(ctx, "blog", "web", "token")
	require.ErrorIs(t, err, core.ErrNotFound)
	require.ErrorIs(t, s.RemoveSecret(ctx, "blog", "web", "token"), core.ErrNotFound)
	names, err = s.ListSecrets(ctx, "blog", "web")
	require.NoError(t, err)
	assert.Equal(t, []string{"api-key"}, names)

	for _, bad := range []string{"", "../x", "a/b", ".."} {
		require.ErrorIs(t, s.SetSecret(ctx, "blog", "web", bad, []byte("x")), core.ErrInvalid, "name %q", bad)
		_, err = s.GetSecret(ctx, "blog", "web", bad)
		require.ErrorIs(t, err, core.ErrInvalid, "name %q", bad)
	}
	require.ErrorIs(t, s.SetSecret(ctx, "blog", "../web", "x", []byte("x")), core.ErrInvalid)
}

func storeContainerSecrets(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	_, err := s.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	p1, err := s.WriteContainerSecret(ctx, "blog", "c-1", "token", []byte("v"))
	require.NoError(t, err)
	assert.NotEmpty(t, p1)
	p2, err := s.WriteContainerSecret(ctx, "blog", "c-2", "token", []byte("v"))
	require.NoError(t, err)
	assert.NotEqual(t, p1, p2, "each container has its own copy")
	_, err = s.WriteContainerSecret(ctx, "blog", "c-1", "../escape", []byte("v"))
	require.ErrorIs(t, err, core.ErrInvalid)
	require.NoError(t, s.DeleteContainerSecrets(ctx, "blog", "c-1"))
	require.NoError(t, s.DeleteContainerSecrets(ctx, "blog", "c-1"), "deleting twice is no error")
	require.NoError(t, s.DeleteContainerSecrets(ctx, "blog", "c-never"))
}

func suiteHolder(verb, op string) core.LockHolder {
	return core.LockHolder{PID: os.Getpid(), Verb: verb, Op: op, StartedAt: suiteT0}
}

func storeLock(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	_, err := s.LockHolder(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound)

	l, err := s.Lock(ctx, "blog", suiteHolder("deploy", "op-lock-1"))
	require.NoError(t, err)
	h, err := s.LockHolder(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "deploy", h.Verb)
	assert.Equal(t, "op-lock-1", h.Op)
	assert.Equal(t, os.Getpid(), h.PID)

	// Busy: TryLock says so without error; Lock gives up when ctx ends with
	// a conflict naming the holder.
	_, ok, err := s.TryLock(ctx, "blog", suiteHolder("reconcile", ""))
	require.NoError(t, err)
	assert.False(t, ok)
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Lock(short, "blog", suiteHolder("stop", "op-lock-2"))
	require.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "deploy")
	assert.Contains(t, err.Error(), "op-lock-1")
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "Lock waits until ctx is done")

	// Another app is independent.
	other, ok, err := s.TryLock(ctx, "api", suiteHolder("reconcile", ""))
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, other.Unlock())

	require.NoError(t, l.Unlock())
	require.NoError(t, l.Unlock(), "unlocking twice is a no-op")
	_, err = s.LockHolder(ctx, "blog")
	require.ErrorIs(t, err, core.ErrNotFound)

	l2, ok, err := s.TryLock(ctx, "blog", suiteHolder("reconcile", ""))
	require.NoError(t, err)
	require.True(t, ok)
	h, err = s.LockHolder(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "reconcile", h.Verb)
	require.NoError(t, l2.Unlock())
}

func storeLockWaits(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	l, err := s.Lock(ctx, "blog", suiteHolder("deploy", "op-1"))
	require.NoError(t, err)
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		released <- time.Now()
		_ = l.Unlock()
	}()
	l2, err := s.Lock(ctx, "blog", suiteHolder("stop", "op-2"))
	require.NoError(t, err)
	got := time.Now()
	select {
	case at := <-released:
		assert.False(t, got.Before(at), "the second Lock returned only after the release")
	default:
		t.Fatal("Lock returned while the first holder still held the lock")
	}
	h, err := s.LockHolder(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "stop", h.Verb)
	require.NoError(t, l2.Unlock())
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("suite context expired")
	}
}
