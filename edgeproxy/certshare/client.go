package certshare

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// ErrUnauthorized is wrapped by a Client's errors when the server
// answered 401 (a wrong token).
var ErrUnauthorized = errors.New("certshare: server refused the token (401)")

// maxReply bounds a reply body a Client reads.
const maxReply = 16 << 20

// Client is the client of a Server: certmagic.Storage's methods (and
// certmagic.Locker's and certmagic.LockLeaseRenewer's) with the same
// signatures, but Stat returns this package's KeyInfo (so the package,
// linked by the CLI that runs the Server, links no certmagic): the edge
// wraps it into a certmagic.Storage with a Stat converting KeyInfo. Load,
// List and Stat of a missing key return errors wrapping fs.ErrNotExist,
// as certmagic requires. A held lock is renewed every third of the
// server's lease TTL until Unlock. It is safe for concurrent use.
type Client struct {
	// Token, when set, is asked for the bearer token of each request (a
	// swarm edge's token rotates); NewClient's token otherwise.
	Token func() string

	base  string
	token string
	hc    *http.Client

	mu   sync.Mutex
	held map[string]*heldLock
}

// heldLock is a lock this client holds: its lease id and the renewer's
// stop.
type heldLock struct {
	lease string
	stop  context.CancelFunc
	done  chan struct{}
}

// NewClient returns a Client of the Server at baseURL (http or https,
// e.g. "http://gordon-reconcile:9190"), authorized by token, over hc (nil:
// a client with a 60 s request bound, above Server.MaxWait). It fails
// with ErrNoToken for an empty token and for a URL without a scheme
// http(s) and a host.
func NewClient(baseURL, token string, hc *http.Client) (*Client, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, ErrNoToken
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("certshare: storage URL %q: want http://HOST:PORT", baseURL)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return &Client{base: strings.TrimSuffix(baseURL, "/"), token: token, hc: hc, held: map[string]*heldLock{}}, nil
}

// String names the storage (certmagic logs it).
func (c *Client) String() string { return "certshare:" + c.base }

// statusError is a reply other than 2xx.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.msg) }

// Unwrap maps 404 to fs.ErrNotExist and 401 to ErrUnauthorized.
func (e *statusError) Unwrap() error {
	switch e.code {
	case http.StatusNotFound:
		return fs.ErrNotExist
	case http.StatusUnauthorized:
		return ErrUnauthorized
	}
	return nil
}

// do sends one request and returns the 2xx reply's body.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body []byte) ([]byte, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	tok := c.token
	if c.Token != nil {
		tok = c.Token()
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, &statusError{code: resp.StatusCode, msg: strings.TrimSpace(string(b))}
	}
	return b, nil
}

func keyQuery(key string) url.Values { return url.Values{"key": {key}} }

// Store puts value at key (at most MaxValueBytes).
func (c *Client) Store(ctx context.Context, key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	if _, err := c.do(ctx, http.MethodPut, "/v1/acme", keyQuery(key), value); err != nil {
		return fmt.Errorf("certshare: store %s: %w", key, err)
	}
	return nil
}

// Load returns the value at key; an error wrapping fs.ErrNotExist when
// there is none.
func (c *Client) Load(ctx context.Context, key string) ([]byte, error) {
	b, err := c.do(ctx, http.MethodGet, "/v1/acme", keyQuery(key), nil)
	if err != nil {
		return nil, fmt.Errorf("certshare: load %s: %w", key, err)
	}
	return b, nil
}

// Delete removes key and everything under it; nil when it is absent.
func (c *Client) Delete(ctx context.Context, key string) error {
	if _, err := c.do(ctx, http.MethodDelete, "/v1/acme", keyQuery(key), nil); err != nil {
		return fmt.Errorf("certshare: delete %s: %w", key, err)
	}
	return nil
}

// Exists reports whether key exists (a file or a directory); false also
// when the server cannot be asked.
func (c *Client) Exists(ctx context.Context, key string) bool {
	_, err := c.Stat(ctx, key)
	return err == nil
}

// List returns the keys under prefix (recursive: at every depth); an
// error wrapping fs.ErrNotExist when prefix does not exist.
func (c *Client) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	q := keyQuery(prefix)
	if recursive {
		q.Set("recursive", "1")
	}
	b, err := c.do(ctx, http.MethodGet, "/v1/list", q, nil)
	if err != nil {
		return nil, fmt.Errorf("certshare: list %s: %w", prefix, err)
	}
	var keys []string
	if err := json.Unmarshal(b, &keys); err != nil {
		return nil, fmt.Errorf("certshare: list %s: %w", prefix, err)
	}
	return keys, nil
}

// Stat returns key's information; an error wrapping fs.ErrNotExist when
// it does not exist.
func (c *Client) Stat(ctx context.Context, key string) (KeyInfo, error) {
	b, err := c.do(ctx, http.MethodGet, "/v1/stat", keyQuery(key), nil)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("certshare: stat %s: %w", key, err)
	}
	var ki KeyInfo
	if err := json.Unmarshal(b, &ki); err != nil {
		return KeyInfo{}, fmt.Errorf("certshare: stat %s: %w", key, err)
	}
	return ki, nil
}
