package dashboard

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"
)

// Help is the verb's long help.
const Help = `Serve web pages of the apps: instances, the edge's rates and latency per
generation, operations with their steps as they happen, the access log and
the certificates. Read-only: each page shows the command of the next step.
It listens on loopback unless --token-file names a token (one line, 16 or
more characters) that every request must then carry (open the page once
with ?token=TOKEN, or send Authorization: Bearer TOKEN). With a remote
docker context the state is read on that machine and sent back over the
docker connection: no port is opened there. Ctrl-C stops it.`

// Options are `docker gordon dashboard`'s: where to listen, the token,
// and where the state comes from.
type Options struct {
	// Addr is the listen address (DefaultAddr when ""); TokenFile the
	// --token-file ("" none).
	Addr, TokenFile string
	// Interval is the periodic read's (see RunLocal).
	Interval time.Duration
	// CLI and Engine: see Server.
	CLI, Engine string
	// Stderr gets the address served and the feed's failure.
	Stderr io.Writer
	// StateDir is the local state directory whose journal is watched, and
	// Collector what reads it; both unused with Remote.
	StateDir  string
	Collector func(ctx context.Context) (*Collector, error)
	// Remote, if set, runs the feed on a remote engine (a runner whose
	// output is WriteFeed's), writing its output to out until ctx ends.
	Remote func(ctx context.Context, out io.Writer) error
}

// Run serves the dashboard until ctx ends. It refuses, before it
// listens or reads anything, a non-loopback address without a token
// (CheckAddr) and a token file that does not hold one (ReadToken). A feed
// that fails ends it with that error.
func Run(ctx context.Context, o Options) error {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	token := ""
	if o.TokenFile != "" {
		var err error
		if token, err = ReadToken(o.TokenFile); err != nil {
			return err
		}
	}
	if err := CheckAddr(o.Addr, token != ""); err != nil {
		return err
	}
	f := NewFeed()
	srv := &Server{Feed: f, Token: token, CLI: o.CLI, Engine: o.Engine}
	h, err := srv.Handler()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("dashboard: listen on %s (is another dashboard running there? pick another --addr): %w", o.Addr, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	feedErr := make(chan error, 1)
	go func() {
		err := feed(ctx, o, f)
		if ctx.Err() == nil {
			feedErr <- err
			cancel()
		}
		close(feedErr)
	}()
	fmt.Fprintf(o.Stderr, "dashboard: http://%s/ (read-only; Ctrl-C stops it)\n", ln.Addr())
	serr := Serve(ctx, ln, h)
	cancel()
	if err := <-feedErr; err != nil {
		return err
	}
	return serr
}

// feed publishes to f from the local state or from the remote runner.
func feed(ctx context.Context, o Options, f *Feed) error {
	if o.Remote == nil {
		c, err := o.Collector(ctx)
		if err != nil {
			return err
		}
		return RunLocal(ctx, f, c, o.StateDir, o.Interval)
	}
	pr, pw := io.Pipe()
	go func() { _ = pw.CloseWithError(o.Remote(ctx, pw)) }()
	err := ReadFeed(ctx, pr, f)
	_ = pr.Close()
	return err
}

// RunFeed is a runner's side of a remote dashboard: o.Collector's
// Snapshots of o.StateDir (read as RunLocal reads them) written to w as
// WriteFeed writes them, until ctx ends or w fails.
func RunFeed(ctx context.Context, o Options, w io.Writer) error {
	c, err := o.Collector(ctx)
	if err != nil {
		return err
	}
	f := NewFeed()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- RunLocal(ctx, f, c, o.StateDir, o.Interval) }()
	werr := WriteFeed(ctx, f, w)
	cancel()
	if err := <-errc; err != nil {
		return err
	}
	return werr
}
