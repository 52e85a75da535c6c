package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/system"
)

func newCertsCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Manage the edge's HTTPS certificates (your own; ACME ones are automatic)",
		Long: `The edge serves HTTPS (gordon-edge --https-addr) with certificates it
obtains itself (ACME) for every routed host whose interface has tls = "auto"
or "always", and with certificates you add here, which take precedence.
Certificates live in the edge's part of the state directory (0700, keys 0600);
the traffic backend stores them and the edge picks them up within seconds.`,
	}
	cmd.AddCommand(newCertsAddCommand(env), newCertsRmCommand(env), newCertsLsCommand(env))
	return cmd
}

// certStore returns the traffic/edge backend as a core.CertStore.
func certStore(ctx context.Context, env *cliEnv) (core.CertStore, error) {
	host, err := env.pluginHost()
	if err != nil {
		return nil, err
	}
	tr, err := host.Traffic(ctx, "edge")
	if err != nil {
		return nil, err
	}
	cs, ok := tr.(core.CertStore)
	if !ok {
		return nil, fmt.Errorf("%w: the traffic backend does not hold certificates", core.ErrInvalid)
	}
	return cs, nil
}

func newCertsAddCommand(env *cliEnv) *cobra.Command {
	var certPath, keyPath string
	cmd := &cobra.Command{
		Use:   "add HOST --cert FILE --key FILE",
		Short: "Serve your own certificate for HOST (exact or *.example.com)",
		Long: `Stores a PEM certificate chain and its private key for HOST. They are
refused, and nothing changes, when either does not parse, the key does not
match the certificate, the certificate does not cover HOST or is expired.
A wildcard HOST (*.example.com) needs a certificate naming *.example.com.`,
		Example: `  docker gordon certs add blog.example.com --cert fullchain.pem --key privkey.pem
  docker gordon certs add '*.example.com' --cert wildcard.pem --key wildcard.key`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			certPEM, err := system.ReadCertFile("cert", certPath)
			if err != nil {
				return fmt.Errorf("certs add %s: %w", args[0], err)
			}
			keyPEM, err := system.ReadCertFile("key", keyPath)
			if err != nil {
				return fmt.Errorf("certs add %s: %w", args[0], err)
			}
			ctx, cancel := withTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			cs, err := certStore(ctx, env)
			if err != nil {
				return fmt.Errorf("certs add %s: %w", args[0], err)
			}
			info, err := cs.AddCert(ctx, args[0], certPEM, keyPEM)
			if err != nil {
				return fmt.Errorf("certs add %s: %w", args[0], err)
			}
			fmt.Fprintf(env.dockerCli.Out(), "certificate for %s stored (issuer %s, valid until %s); the edge serves it within a few seconds\n",
				info.Host, info.Issuer, info.NotAfter.Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().StringVar(&certPath, "cert", "", "PEM certificate chain file, leaf first (required)")
	cmd.Flags().StringVar(&keyPath, "key", "", "PEM private key file (required)")
	return cmd
}

func newCertsRmCommand(env *cliEnv) *cobra.Command {
	return &cobra.Command{
		Use:     "rm HOST",
		Aliases: []string{"remove"},
		Short:   "Stop serving your own certificate for HOST (ACME takes over when its tls policy allows)",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := withTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			cs, err := certStore(ctx, env)
			if err != nil {
				return fmt.Errorf("certs rm %s: %w", args[0], err)
			}
			if err := cs.RemoveCert(ctx, args[0]); err != nil {
				return fmt.Errorf("certs rm %s: %w", args[0], err)
			}
			fmt.Fprintf(env.dockerCli.Out(), "certificate for %s removed\n", args[0])
			return nil
		},
	}
}

func newCertsLsCommand(env *cliEnv) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List every host's certificate: source, issuer, expiry, state",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := withTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			cs, err := certStore(ctx, env)
			if err != nil {
				return fmt.Errorf("certs ls: %w", err)
			}
			infos, err := cs.ListCerts(ctx)
			if err != nil {
				return fmt.Errorf("certs ls: %w", err)
			}
			if isJSON(format) {
				if infos == nil {
					infos = []core.CertInfo{}
				}
				return writeJSON(env.dockerCli.Out(), infos)
			}
			tw := newTable(env.dockerCli.Out())
			fmt.Fprintln(tw, "HOST\tSOURCE\tISSUER\tNOT AFTER\tSTATE")
			for _, in := range infos {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Host, in.Source, orDash(in.Issuer), timeOrDash(in.NotAfter), certStateText(in))
			}
			return tw.Flush()
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

// certStateText is the STATE column: "failed: <error> (retry at T)".
func certStateText(in core.CertInfo) string {
	s := in.State
	if in.Error != "" {
		s += ": " + in.Error
	}
	if !in.RetryAt.IsZero() {
		s += " (retry at " + in.RetryAt.Format(time.RFC3339) + ")"
	}
	return s
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// renderCertStates prints each routed host's certificate state after
// `status` (text only; `certs ls --format json` has the data): hosts come
// from the services' "http://HOST -> :PORT" routes. Quiet when the edge
// holds no certificate at all (no HTTPS).
func renderCertStates(ctx context.Context, env *cliEnv, apps []engine.AppStatus) {
	ctx, cancel := withTimeout(ctx, 5*time.Second)
	defer cancel()
	cs, err := certStore(ctx, env)
	if err != nil {
		return
	}
	infos, err := cs.ListCerts(ctx)
	if err != nil || len(infos) == 0 {
		return
	}
	byHost := map[string]core.CertInfo{}
	for _, in := range infos {
		byHost[in.Host] = in
	}
	w := env.dockerCli.Out()
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "HOST	CERTIFICATE	SOURCE	NOT AFTER")
	for _, st := range apps {
		for _, s := range st.Services {
			for _, r := range s.Routes {
				host, ok := strings.CutPrefix(r, "http://")
				if !ok {
					continue
				}
				host, _, _ = strings.Cut(host, " ")
				in, ok := byHost[host]
				if !ok {
					if i := strings.IndexByte(host, '.'); i > 0 {
						in, ok = byHost["*"+host[i:]]
					}
				}
				if !ok {
					fmt.Fprintf(tw, "%s\tnone\t-\t-\n", host)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", host, certStateText(in), in.Source, timeOrDash(in.NotAfter))
			}
		}
	}
	tw.Flush()
}
