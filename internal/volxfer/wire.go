// Package volxfer moves one volume's tar between the swarm runtime (on the
// manager, in the runner or the reconcile container) and a one-shot helper
// task on the node that holds the volume (`gordon-edge volume-helper`),
// over the control network, encrypted and authenticated by the two ends
// themselves (the control network's overlay is not encrypted).
//
// The runtime listens (Listen) on its own address on the control network
// with TLS 1.3 and an ephemeral self-signed ECDSA P-256 certificate made for
// this one transfer, and hands the helper (Offer.Env) its address, the
// certificate's SHA-256 and a random 32-byte token. The helper (Run) dials,
// checks the certificate against the pin, and sends a hello: "GVX1", one
// mode byte (ModeExport or ModeRestore) and the token's 64 hex digits. The
// runtime compares the token in constant time and keeps the first
// connection that presents it; any other is closed.
//
// After the hello both directions carry frames: one type byte, a 4-byte
// big-endian length, the payload. 'D' is data (at most 1 MiB), 'E' the end
// of the data or a success reply (no payload), 'X' a failure with its
// message (at most 4 KiB). An export is the helper's tar in 'D' frames, then
// 'E' (or 'X'), answered by the runtime's 'E' once it has written it all
// (or 'X'); a restore is the runtime's tar in 'D' frames, then 'E',
// answered by the helper's 'E' once it has extracted it all (or 'X' as
// soon as it fails). A connection that ends before the 'E' is ErrCut,
// never a short tar.
//
// The tar (WriteTar) is the docker runtime's ExportVolume format: names
// relative to the volume root, the root's own entry dropped, owners, modes,
// mtimes (whole seconds), symlinks and hardlinks kept. Extract writes one
// into a directory through an os.Root, so no entry lands outside it.
package volxfer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Modes of a transfer (the hello's mode byte).
const (
	// ModeExport: the helper sends the volume's tar.
	ModeExport byte = 'E'
	// ModeRestore: the helper empties the volume and extracts the tar it
	// receives.
	ModeRestore byte = 'R'
)

// Environment of the helper task (Offer.Env, ConfigFromEnv).
const (
	EnvPeer  = "GORDON_VOLUME_PEER"  // host:port of the runtime's listener
	EnvPin   = "GORDON_VOLUME_PIN"   // hex SHA-256 of its certificate (DER)
	EnvToken = "GORDON_VOLUME_TOKEN" // 64 hex digits
	EnvMode  = "GORDON_VOLUME_MODE"  // "export" or "restore"
	EnvDir   = "GORDON_VOLUME_DIR"   // the volume's mount (default MountPath)
)

// MountPath is where the helper task mounts the volume.
const MountPath = "/gordon-volume"

const (
	magic      = "GVX1"
	tokenHex   = 64
	helloLen   = len(magic) + 1 + tokenHex
	maxData    = 1 << 20
	maxMessage = 4 << 10

	frameData = 'D'
	frameEnd  = 'E'
	frameFail = 'X'
)

// ErrCut is a transfer whose connection ended before its end frame.
var ErrCut = errors.New("the connection ended before the transfer was complete")

// errProtocol is a frame that breaks the protocol.
var errProtocol = errors.New("volume transfer protocol error")

// PeerError is the other end's failure, in its words.
type PeerError struct{ Msg string }

func (e *PeerError) Error() string { return e.Msg }

// modeName is the environment's name of mode.
func modeName(mode byte) string {
	if mode == ModeRestore {
		return "restore"
	}
	return "export"
}

func writeFrame(w io.Writer, typ byte, p []byte) error {
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(p)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(p)
	return err
}

// frameWriter writes data frames to a buffered connection.
type frameWriter struct{ w *bufio.Writer }

func (f frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), maxData)
		if err := writeFrame(f.w, frameData, p[:c]); err != nil {
			return n, err
		}
		n += c
		p = p[c:]
	}
	return n, nil
}

// end writes the end frame (or a success reply) and flushes.
func (f frameWriter) end() error {
	if err := writeFrame(f.w, frameEnd, nil); err != nil {
		return err
	}
	return f.w.Flush()
}

// fail writes a failure frame with msg (cut to maxMessage) and flushes.
func (f frameWriter) fail(msg string) error {
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	if err := writeFrame(f.w, frameFail, []byte(msg)); err != nil {
		return err
	}
	return f.w.Flush()
}

// frameReader reads the data of the frames until the end frame (io.EOF);
// a failure frame is a *PeerError, a connection that ends first ErrCut.
type frameReader struct {
	r    *bufio.Reader
	left int
	err  error
}

func (f *frameReader) Read(p []byte) (int, error) {
	for f.left == 0 {
		if f.err != nil {
			return 0, f.err
		}
		typ, payload, n, err := readFrame(f.r)
		switch {
		case err != nil:
			f.err = err
		case typ == frameData:
			f.left = n
		case typ == frameEnd:
			f.err = io.EOF
		default:
			f.err = &PeerError{Msg: string(payload)}
		}
	}
	n, err := f.r.Read(p[:min(len(p), f.left)])
	f.left -= n
	if err != nil && f.left > 0 {
		f.err = cut(err)
		return n, f.err
	}
	return n, nil
}

// readFrame reads a frame's header and, for an end or failure frame, its
// payload; a data frame's length n is left to read.
func readFrame(r *bufio.Reader) (typ byte, payload []byte, n int, err error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, 0, cut(err)
	}
	typ, n = h[0], int(binary.BigEndian.Uint32(h[1:]))
	switch {
	case typ == frameData && n > 0 && n <= maxData:
		return typ, nil, n, nil
	case typ == frameEnd && n == 0:
		return typ, nil, 0, nil
	case typ == frameFail && n <= maxMessage:
		payload = make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return 0, nil, 0, cut(err)
		}
		return typ, payload, 0, nil
	}
	return 0, nil, 0, fmt.Errorf("%w: frame %q of %d bytes", errProtocol, typ, n)
}

// readReply reads the other end's reply: nil for success, a *PeerError for
// a failure, ErrCut when the connection ends first.
func readReply(r *bufio.Reader) error {
	typ, payload, _, err := readFrame(r)
	switch {
	case err != nil:
		return err
	case typ == frameEnd:
		return nil
	case typ == frameFail:
		return &PeerError{Msg: string(payload)}
	}
	return fmt.Errorf("%w: data where a reply was due", errProtocol)
}

// cut maps a connection's end to ErrCut.
func cut(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrCut
	}
	return fmt.Errorf("%w: %w", ErrCut, err)
}
