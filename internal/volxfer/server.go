package volxfer

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"time"
)

// helloTimeout bounds how long a connection may take to present its hello.
const helloTimeout = 10 * time.Second

// Listener is the runtime's end of one transfer: a TLS listener with its
// own certificate and token, which keeps the first connection that
// presents the token.
type Listener struct {
	ln    net.Listener
	conf  *tls.Config
	pin   string
	token string
	mode  byte
}

// Listen listens on ip (port chosen by the system) for one transfer in
// mode (ModeExport or ModeRestore), with a new self-signed certificate
// (ECDSA P-256, valid for a day) and a new random token.
func Listen(ip string, mode byte) (*Listener, error) {
	cert, pin, err := selfSigned()
	if err != nil {
		return nil, fmt.Errorf("make the transfer's certificate: %w", err)
	}
	tok := make([]byte, tokenHex/2)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen on %s for the volume transfer: %w", ip, err)
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}}
	return &Listener{ln: ln, conf: conf, pin: pin, token: hex.EncodeToString(tok), mode: mode}, nil
}

// Addr is the listener's host:port.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Env is the helper task's environment for this transfer (the EnvPeer,
// EnvPin, EnvToken and EnvMode variables).
func (l *Listener) Env() []string {
	return []string{EnvPeer + "=" + l.Addr(), EnvPin + "=" + l.pin, EnvToken + "=" + l.token, EnvMode + "=" + modeName(l.mode)}
}

// Close stops listening (a connection Accept returned stays open).
func (l *Listener) Close() error { return l.ln.Close() }

// Accept waits for the first connection that completes the TLS handshake
// and presents the token for this mode, within ctx; the listener is then
// closed. Connections that do not are closed. ctx's end is ctx's error
// (context.Cause).
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	good := make(chan *tls.Conn, 1)
	var once sync.Once
	stop := context.AfterFunc(ctx, func() { l.ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	pending := map[net.Conn]bool{}
	for {
		c, err := l.ln.Accept()
		if err != nil {
			break
		}
		mu.Lock()
		pending[c] = true
		mu.Unlock()
		wg.Go(func() {
			tc, ok := l.hello(c)
			mu.Lock()
			delete(pending, c)
			mu.Unlock()
			if !ok {
				c.Close()
				return
			}
			taken := false
			once.Do(func() { good <- tc; taken = true; l.ln.Close() })
			if !taken {
				tc.Close()
			}
		})
	}
	// The listener is closed: a connection still in its hello is not
	// waited for.
	mu.Lock()
	for c := range pending {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	select {
	case tc := <-good:
		return &Conn{c: tc.NetConn(), r: bufio.NewReaderSize(tc, 256<<10), w: bufio.NewWriterSize(tc, 256<<10)}, nil
	default:
	}
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return nil, errors.New("the transfer's listener was closed")
}

// hello runs the TLS handshake and checks the hello within helloTimeout.
func (l *Listener) hello(c net.Conn) (*tls.Conn, bool) {
	_ = c.SetDeadline(time.Now().Add(helloTimeout))
	tc := tls.Server(c, l.conf)
	buf := make([]byte, helloLen)
	if _, err := io.ReadFull(tc, buf); err != nil {
		return nil, false
	}
	want := []byte(magic + string(l.mode) + l.token)
	if subtle.ConstantTimeCompare(buf, want) != 1 {
		return nil, false
	}
	_ = c.SetDeadline(time.Time{})
	return tc, true
}

// selfSigned makes a certificate for one transfer and its pin (the hex
// SHA-256 of its DER).
func selfSigned() (tls.Certificate, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "gordon volume transfer"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	sum := sha256.Sum256(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, hex.EncodeToString(sum[:]), nil
}

// Conn is the runtime's accepted connection to the helper (c is the TCP
// connection under the TLS one: closing it never waits for a blocked
// write).
type Conn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// Close closes the connection; a transfer in progress then fails.
func (c *Conn) Close() error { return c.c.Close() }

// Receive copies the helper's tar (an export) to w, then tells the helper
// it was written. The helper's failure is a *PeerError, a connection that
// ends first ErrCut, and w's error is returned as is (wrapped with "write
// the tar"), after the helper was told.
func (c *Conn) Receive(w io.Writer) error {
	fr := &frameReader{r: c.r}
	buf := make([]byte, 256<<10)
	fw := frameWriter{w: c.w}
	for {
		n, rerr := fr.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				_ = fw.fail("the manager stopped the export: " + err.Error())
				return fmt.Errorf("write the tar: %w", err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	return fw.end()
}

// Send sends r's tar (a restore) to the helper and waits for its reply:
// nil once it extracted all of it. The helper's failure is a *PeerError
// (as soon as it fails, while the tar is still being sent); a connection
// that ends first is ErrCut; an error reading r is returned wrapped with
// "read the snapshot", and the helper is told to stop.
func (c *Conn) Send(r io.Reader) error {
	type result struct {
		err    error
		source bool
	}
	sent := make(chan result, 1)
	stop := make(chan struct{})
	go func() {
		fw := frameWriter{w: c.w}
		_, err := io.Copy(fw, readerOnly{r, stop})
		var re readErr
		switch {
		case errors.As(err, &re):
			_ = fw.fail("the manager could not read the snapshot: " + re.err.Error())
			sent <- result{fmt.Errorf("read the snapshot: %w", re.err), true}
		case err != nil:
			sent <- result{err: cut(err)}
		default:
			sent <- result{err: fw.end()}
		}
	}()
	reply := readReply(c.r)
	if reply != nil {
		close(stop)
		c.c.Close() // unblocks the sender
	}
	res := <-sent
	switch {
	case res.source:
		return res.err
	case reply != nil:
		return reply
	}
	return res.err
}

// readErr marks an error of the source reader (not the connection).
type readErr struct{ err error }

func (e readErr) Error() string { return e.err.Error() }

// readerOnly wraps the source's errors (but io.EOF) in readErr, so that
// io.Copy's error says which side failed; once stop is closed it reads
// no more.
type readerOnly struct {
	r    io.Reader
	stop <-chan struct{}
}

func (r readerOnly) Read(p []byte) (int, error) {
	select {
	case <-r.stop:
		return 0, ErrCut // not a readErr: the helper's reply is the error
	default:
	}
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, readErr{err}
	}
	return n, err
}
