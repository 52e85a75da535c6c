package upstream

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// Decision 11: proxy errors map to 504 (timeout), 503 (refused/reset: no
// container listening), 502 (anything else) and nothing when the client
// went away.
func TestDecision11_ClassifyProxyError(t *testing.T) {
	bg := context.Background()
	canceled, cancel := context.WithCancel(bg)
	cancel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want int
	}{
		{"deadline", bg, context.DeadlineExceeded, http.StatusGatewayTimeout},
		{"dial timeout", bg, &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}, http.StatusGatewayTimeout},
		{"refused", bg, refused, http.StatusServiceUnavailable},
		{"reset", bg, reset, http.StatusServiceUnavailable},
		{"other", bg, errors.New("malformed HTTP response"), http.StatusBadGateway},
		{"client gone", canceled, context.Canceled, 0},
	}
	for _, c := range cases {
		code, what := Classify(c.ctx, c.err)
		assert.Equal(t, c.want, code, c.name)
		if c.want != 0 {
			assert.NotEmpty(t, what, c.name)
		}
	}
}
