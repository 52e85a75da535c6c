package manifest

import (
	"net/url"

	"github.com/gordon-deploy/docker-gordon/core"
)

// notify validates [notify]: webhook is required in the table and must be
// an absolute http or https URL with a host and no user info.
func (v *validator) notify(raw *rawNotify) *core.NotifySpec {
	if raw == nil {
		return nil
	}
	if raw.Webhook == nil {
		v.add("notify", `[notify] needs webhook = "https://…": the URL each operation outcome is POSTed to`)
		return nil
	}
	u, err := url.Parse(*raw.Webhook)
	switch {
	case err != nil:
		v.addf("notify.webhook", "invalid URL %q: %v", *raw.Webhook, err)
	case u.Scheme != "http" && u.Scheme != "https":
		v.addf("notify.webhook", `webhook %q: want an http:// or https:// URL`, *raw.Webhook)
	case u.Host == "":
		v.addf("notify.webhook", `webhook %q: the URL has no host`, *raw.Webhook)
	case u.User != nil:
		v.addf("notify.webhook", `webhook %q: put no user or password in the URL (it is stored in every revision); use a token in the path or query if the receiver needs one`, redactUser(u))
	default:
		return &core.NotifySpec{Webhook: *raw.Webhook}
	}
	return nil
}

// redactUser is u with its password replaced, for error messages.
func redactUser(u *url.URL) string { return u.Redacted() }
