package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Notification bounds: NotifyTries POSTs, each bounded by NotifyTimeout,
// NotifyBackoff apart (doubling), the whole bounded by NotifyBudget.
const (
	NotifyTries   = 3
	NotifyTimeout = 2 * time.Second
	NotifyBackoff = 250 * time.Millisecond
	NotifyBudget  = 8 * time.Second
)

// VerbReconcile is Notification.Verb of a failed recovery of the periodic
// pass (no op of its own).
const VerbReconcile = "reconcile"

// Notification is the JSON document POSTed to an app's [notify] webhook,
// one per operation outcome: a deploy, a rollback, a failed recovery of
// the reconcile pass. It carries ids, results, error texts and durations
// only: never an env value, a secret, a log line or a credential.
type Notification struct {
	// Schema is the document's version (1; fields are only ever added).
	Schema int `json:"schema"`
	// Event is "outcome" for an operation's outcome (and a failed recovery
	// of the reconcile pass), "rollback" for an automatic rollback (R76),
	// which is sent before the outcome of the deploy it happened in.
	Event string `json:"event"`
	App   string `json:"app"`
	// Op is the operation id ("" for a reconcile pass failure).
	Op string `json:"op,omitempty"`
	// Verb is deploy, rollback (or another verb that started a deploy), or
	// reconcile; "rollback" with Automatic for an automatic rollback, whose
	// Op is the deploy it happened in.
	Verb      string `json:"verb"`
	Automatic bool   `json:"automatic,omitempty"`
	// Revision is the revision the op deployed; RollbackTo the revision a
	// rollback returned to.
	Revision   string `json:"revision,omitempty"`
	RollbackTo string `json:"rollback_to,omitempty"`
	// Outcome is success, partial or failed.
	Outcome core.Outcome `json:"outcome"`
	// Error is the op's error text ("" on success); never log lines.
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// DurationMS is FinishedAt - StartedAt in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// Services are the op's per-service steps.
	Services []NotifiedService `json:"services,omitempty"`
	// Warnings counts the op's cleanup warnings (R10).
	Warnings int `json:"warnings,omitempty"`
	// Rollbacks are the automatic rollbacks (R76) of the deploy's
	// services; Rollback the one an event "rollback" document reports.
	Rollbacks []NotifiedRollback `json:"rollbacks,omitempty"`
	Rollback  *NotifiedRollback  `json:"rollback,omitempty"`
}

// NotifiedService is one service step of a notified op.
type NotifiedService struct {
	Service string `json:"service"`
	// State is the step state (succeeded, failed, pending); Result the
	// result a succeeded step reached (deployed, unchanged, removed).
	State  core.StepState `json:"state"`
	Result string         `json:"result,omitempty"`
	Error  string         `json:"error,omitempty"`
	// DurationMS is the step's time from start to last update; PhasesMS
	// its phases (create, start, probe, switch, drain, retire) in ms.
	DurationMS int64            `json:"duration_ms"`
	PhasesMS   map[string]int64 `json:"phases_ms,omitempty"`
}

// notification builds op's document; errText is the op's error ("" when
// it has none), else the text of its first failed step.
func notification(op core.Operation, errText string) Notification {
	n := Notification{Schema: 1, Event: EventOutcome, App: op.App, Op: op.ID, Verb: op.VerbOrKind(), Revision: op.Revision, RollbackTo: op.RollbackTo,
		Outcome: op.Outcome, Error: errText, StartedAt: op.StartedAt, FinishedAt: op.FinishedAt, Warnings: len(op.Warnings)}
	if !op.FinishedAt.IsZero() {
		n.DurationMS = op.FinishedAt.Sub(op.StartedAt).Milliseconds()
	}
	for _, s := range op.Steps {
		if s.State == core.StepFailed && n.Error == "" && op.Outcome != core.OutcomeSuccess {
			n.Error = s.Error
		}
		if s.Service == "" || IsSubStep(s.ID) {
			continue
		}
		ns := NotifiedService{Service: s.Service, State: s.State, Result: s.Result, Error: s.Error}
		if !s.StartedAt.IsZero() && s.UpdatedAt.After(s.StartedAt) {
			ns.DurationMS = s.UpdatedAt.Sub(s.StartedAt).Milliseconds()
		}
		if len(s.Phases) > 0 {
			ns.PhasesMS = map[string]int64{}
			for k, d := range s.Phases {
				ns.PhasesMS[k] = d.D().Milliseconds()
			}
		}
		n.Services = append(n.Services, ns)
		if s.Rollback != nil {
			n.Rollbacks = append(n.Rollbacks, notifiedRollback(s.Service, *s.Rollback))
		}
	}
	sort.SliceStable(n.Services, func(i, j int) bool { return n.Services[i].Service < n.Services[j].Service })
	return n
}

// notifyOp sends op's outcome to the webhook of the revision it deployed
// (nothing when that revision has no [notify], or op is not terminal).
// Call it after the outcome is journaled and the app lock released: the
// documents are queued (postNotification) and a failure is only logged,
// so it never delays nor changes the op's outcome or error.
func (e *Engine) NotifyOp(ctx context.Context, op core.Operation, opErr error) {
	if !op.Terminal() || op.Revision == "" {
		return
	}
	rev, err := e.Store.LoadRevision(context.WithoutCancel(ctx), op.App, op.Revision)
	if err != nil || rev.Spec.Notify == nil || rev.Spec.Notify.Webhook == "" {
		return
	}
	errText := ""
	if opErr != nil && op.Outcome != core.OutcomeSuccess {
		errText = opErr.Error()
	}
	e.postNotification(rev.Spec.Notify.Webhook, append(rollbackNotifications(op), notification(op, errText))...)
}

// notifyRecoveryFailure sends a failed recovery of app by the periodic
// pass to the webhook of the app's latest revision (DESIRED), once per
// distinct error text while this Engine lives (a `reconcile --watch` loop
// does not repeat it every pass); a pass without error clears it.
func (e *Engine) NotifyRecoveryFailure(ctx context.Context, app string, started time.Time, passErr error) {
	e.NotifyMu.Lock()
	last, seen := e.Notified[app]
	switch {
	case passErr == nil:
		delete(e.Notified, app)
	case e.Notified == nil:
		e.Notified = map[string]string{app: passErr.Error()}
	default:
		e.Notified[app] = passErr.Error()
	}
	e.NotifyMu.Unlock()
	if passErr == nil || (seen && last == passErr.Error()) {
		return
	}
	bg := context.WithoutCancel(ctx)
	id, err := e.Store.LoadDesired(bg, app)
	if err != nil {
		return
	}
	rev, err := e.Store.LoadRevision(bg, app, id)
	if err != nil || rev.Spec.Notify == nil || rev.Spec.Notify.Webhook == "" {
		return
	}
	now := e.Now()
	e.postNotification(rev.Spec.Notify.Webhook, Notification{Schema: 1, Event: EventOutcome, App: app, Verb: VerbReconcile, Revision: id,
		Outcome: core.OutcomeFailed, Error: passErr.Error(), StartedAt: started, FinishedAt: now, DurationMS: now.Sub(started).Milliseconds()})
}

// deliver POSTs each of docs, in order, as JSON to url: up to
// NotifyTries attempts each, each bounded by NotifyTimeout, all docs
// together by NotifyBudget. A 2xx answer is delivered; a redirect is not
// followed (a 3xx is a failure); anything else is retried and finally
// logged as a warning that never shows the URL's path or query.
func (e *Engine) deliver(url string, docs []Notification) {
	bctx, cancel := context.WithTimeout(context.Background(), NotifyBudget)
	defer cancel()
	client := noRedirects(e.NotifyClient)
	for _, n := range docs {
		e.postOne(bctx, client, url, n)
	}
}

// noRedirects returns a copy of c (nil: an http.Client bounded by
// NotifyTimeout) that never follows a redirect: the document only ever
// goes to the host the manifest named.
func noRedirects(c *http.Client) *http.Client {
	out := &http.Client{Timeout: NotifyTimeout}
	if c != nil {
		cp := *c
		out = &cp
	}
	out.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return out
}

// postOne is one document of deliver, within bctx's budget.
func (e *Engine) postOne(bctx context.Context, client *http.Client, url string, n Notification) {
	body, err := json.Marshal(n)
	if err != nil {
		return
	}
	wait := NotifyBackoff
	var last error
	for try := 1; try <= NotifyTries; try++ {
		if last = postOnce(bctx, client, url, body); last == nil {
			return
		}
		if try == NotifyTries {
			break
		}
		select {
		case <-bctx.Done():
			try = NotifyTries
		case <-time.After(wait):
		}
		wait *= 2
	}
	why := RedactWebhookError(url, last)
	if e.NotifyFailed != nil {
		// The user's channel says it once; the log keeps it for debugging.
		e.Log().Debug("notify: webhook not delivered", "app", n.App, "op", n.Op, "verb", n.Verb, "webhook", RedactWebhook(url), "error", why)
		e.NotifyFailed(fmt.Sprintf("app %s: notification of %s %s not delivered to its [notify] webhook %s: %s", n.App, n.Verb, n.Op, RedactWebhook(url), why))
		return
	}
	e.Log().Warn("notify: webhook not delivered; the operation's outcome stands", "app", n.App, "op", n.Op, "verb", n.Verb, "webhook", RedactWebhook(url), "error", why)
}

func postOnce(ctx context.Context, client *http.Client, url string, body []byte) error {
	actx, cancel := context.WithTimeout(ctx, NotifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "docker-gordon")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return errors.New(resp.Status)
	}
	return nil
}
