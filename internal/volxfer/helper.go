package volxfer

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// dialFor bounds how long the helper tries to reach the runtime (the
// overlay's route to a new task can take a moment).
var dialFor = 30 * time.Second

// Config is the helper's side of one transfer.
type Config struct {
	// Peer is the runtime's host:port, Pin the hex SHA-256 of its
	// certificate, Token the 64 hex digits it expects.
	Peer, Pin, Token string
	// Mode is ModeExport or ModeRestore.
	Mode byte
	// Dir is the volume's mount.
	Dir string
}

// ConfigFromEnv reads the helper's environment (Env* variables); a
// missing or malformed one is an error naming it.
func ConfigFromEnv() (Config, error) {
	c := Config{Peer: os.Getenv(EnvPeer), Pin: strings.ToLower(os.Getenv(EnvPin)), Token: os.Getenv(EnvToken), Dir: os.Getenv(EnvDir)}
	if c.Dir == "" {
		c.Dir = MountPath
	}
	switch os.Getenv(EnvMode) {
	case "export":
		c.Mode = ModeExport
	case "restore":
		c.Mode = ModeRestore
	default:
		return c, fmt.Errorf("%s must be export or restore", EnvMode)
	}
	if _, _, err := net.SplitHostPort(c.Peer); err != nil {
		return c, fmt.Errorf("%s: %w", EnvPeer, err)
	}
	if b, err := hex.DecodeString(c.Pin); err != nil || len(b) != sha256.Size {
		return c, fmt.Errorf("%s must be 64 hex digits", EnvPin)
	}
	if len(c.Token) != tokenHex {
		return c, fmt.Errorf("%s must be %d hex digits", EnvToken, tokenHex)
	}
	return c, nil
}

// Run is the helper: it dials the runtime (retrying for 30 s), checks its
// certificate against the pin, sends the hello, then exports c.Dir (WriteTar)
// or restores into it (Wipe, then Extract), and waits for the other end's
// reply. nil means both ends finished the transfer.
func Run(ctx context.Context, c Config) error {
	conn, err := dial(ctx, c)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	r, w := bufio.NewReaderSize(conn, 256<<10), bufio.NewWriterSize(conn, 256<<10)
	if _, err := w.WriteString(magic + string(c.Mode) + c.Token); err != nil {
		return fmt.Errorf("send the hello: %w", err)
	}
	fw := frameWriter{w: w}
	if c.Mode == ModeExport {
		return export(c.Dir, r, fw)
	}
	return restore(c.Dir, r, fw)
}

func export(dir string, r *bufio.Reader, fw frameWriter) error {
	bw := bufio.NewWriterSize(fw, maxData)
	err := WriteTar(dir, bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		if !errors.Is(err, ErrCut) {
			_ = fw.fail("the helper could not read the volume: " + err.Error())
		}
		return err
	}
	if err := fw.end(); err != nil {
		return cut(err)
	}
	if err := readReply(r); err != nil {
		return fmt.Errorf("the manager did not store the export: %w", err)
	}
	return nil
}

func restore(dir string, r *bufio.Reader, fw frameWriter) error {
	if err := fw.w.Flush(); err != nil { // the hello
		return cut(err)
	}
	fr := &frameReader{r: r}
	// The volume is emptied only once the manager sends data: a helper
	// it refused, or a snapshot it could not read, leaves it as it was.
	h, err := r.Peek(1)
	if err != nil {
		return cut(err)
	}
	if h[0] == frameData {
		err = restoreInto(dir, fr)
	} else if _, err = io.Copy(io.Discard, fr); err == nil {
		err = fmt.Errorf("%w: the manager sent no tar", errProtocol)
	}
	if err == nil {
		_, err = io.Copy(io.Discard, fr) // what follows the tar's end marker, to the end frame
	}
	if err != nil {
		var pe *PeerError
		if !errors.As(err, &pe) && !errors.Is(err, ErrCut) {
			_ = fw.fail("the helper could not restore the volume: " + err.Error())
		}
		return err
	}
	return fw.end()
}

// restoreInto empties dir and extracts the tar of r into it.
func restoreInto(dir string, r io.Reader) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := Wipe(root); err != nil {
		return err
	}
	return Extract(root, r)
}

// dial connects to c.Peer with TLS 1.3, accepting only the certificate
// whose SHA-256 is c.Pin, retrying for dialFor.
func dial(ctx context.Context, c Config) (*tls.Conn, error) {
	pin, _ := hex.DecodeString(c.Pin)
	conf := &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The certificate is checked against the pin below, not a CA.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the manager presented no certificate")
			}
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(sum[:], pin) != 1 {
				return errors.New("the manager's certificate does not match the pin this helper was given")
			}
			return nil
		},
	}
	deadline := time.Now().Add(dialFor)
	for {
		d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 15 * time.Second}, Config: conf}
		conn, err := d.DialContext(ctx, "tcp", c.Peer)
		if err == nil {
			return conn.(*tls.Conn), nil
		}
		var verr *tls.CertificateVerificationError
		if errors.As(err, &verr) || strings.Contains(err.Error(), "pin") || ctx.Err() != nil || time.Now().After(deadline) {
			return nil, fmt.Errorf("could not reach the manager at %s over the control network: %w", c.Peer, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
