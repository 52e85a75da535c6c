//go:build unix

package edgeproxy

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// handoverPath is the hand-over socket's address: the file in the state
// directory, or, when that path is too long for a unix socket address, an
// abstract name derived from it (both edges share the host network
// namespace, where abstract names live).
func handoverPath(stateDir string) string {
	p := filepath.Join(stateDir, "edge", HandoverFile)
	if len(p) < 100 {
		return p
	}
	h := sha256.Sum256([]byte(p))
	return "@gordon-edge-handover-" + hex.EncodeToString(h[:8])
}

// takeOver asks the edge serving the same state directory for its
// listeners. It returns nil, nil when no edge answers (none runs, or the
// socket is stale); the connection is kept open for confirm.
func (s *Server) takeOver() (*net.UnixConn, error) {
	path := handoverPath(s.cfg.StateDir)
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return nil, nil // nobody to take over from
	}
	uc := c.(*net.UnixConn)
	_ = uc.SetDeadline(time.Now().Add(handoverTimeout))
	if _, err := uc.Write([]byte("take\n")); err != nil {
		_ = uc.Close()
		return nil, nil
	}
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(4*maxHandoverFDs))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		_ = uc.Close()
		return nil, fmt.Errorf("listener hand-over: read offer: %w", err)
	}
	var fds []int
	if oobn > 0 {
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			_ = uc.Close()
			return nil, fmt.Errorf("listener hand-over: control message: %w", err)
		}
		for _, m := range msgs {
			got, err := syscall.ParseUnixRights(&m)
			if err == nil {
				fds = append(fds, got...)
			}
		}
	}
	var offer handoverOffer
	if err := json.Unmarshal(buf[:n], &offer); err != nil || len(offer.Listeners) != len(fds) {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
		_ = uc.Close()
		return nil, fmt.Errorf("listener hand-over: bad offer (%d descriptors): %v", len(fds), err)
	}
	s.socks.mu.Lock()
	for i, e := range offer.Listeners {
		syscall.CloseOnExec(fds[i])
		s.socks.inherited[e.Name] = inheritedSocket{addr: e.Addr, f: os.NewFile(uintptr(fds[i]), e.Name)}
	}
	s.socks.mu.Unlock()
	s.Logger.Info("took the listeners over from the running edge", "pid", offer.PID, "listeners", len(fds))
	return uc, nil
}

// confirmTakeOver tells the old edge this one serves, then waits (bounded)
// for it to close its hand-over socket.
func (s *Server) confirmTakeOver(uc *net.UnixConn) {
	defer uc.Close()
	_ = uc.SetDeadline(time.Now().Add(handoverTimeout))
	if _, err := uc.Write([]byte("serving\n")); err != nil {
		s.Logger.Warn("listener hand-over: confirm", "error", err)
		return
	}
	var b [1]byte
	_, _ = uc.Read(b[:]) // EOF once the old edge let go of the socket
}

// listenHandover serves hand-over requests until the first successful one
// (then handedOver is closed) or ln closes.
func (s *Server) listenHandover() (net.Listener, error) {
	path := handoverPath(s.cfg.StateDir)
	if path[0] != '@' {
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("gordon-edge: hand-over socket %s: %w", path, err)
	}
	// The file may be replaced by the next edge's own socket: never unlink it.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			uc := c.(*net.UnixConn)
			if s.giveListeners(uc) {
				_ = ln.Close()
				s.handoverOnce.Do(func() { close(s.handedOver) })
				// The new edge reports ready on EOF: only once this one
				// accepts nothing more (Run's stopAccepting), so that a
				// connection made after it is ready is never accepted here
				// and cut at this edge's drain bound.
				t := time.NewTimer(handoverTimeout)
				select {
				case <-s.acceptStopped:
				case <-t.C:
				}
				t.Stop()
				_ = uc.Close() // EOF: the new edge may listen now
				return
			}
		}
	}()
	return ln, nil
}

// giveListeners answers one "take": it sends every listener and reports
// whether the new edge confirmed it serves. On true the caller closes uc
// after the hand-over socket.
func (s *Server) giveListeners(uc *net.UnixConn) bool {
	ok := false
	defer func() {
		if !ok {
			_ = uc.Close()
		}
	}()
	_ = uc.SetDeadline(time.Now().Add(handoverTimeout))
	br := bufio.NewReader(uc)
	line, err := br.ReadString('\n')
	if err != nil || line != "take\n" {
		return false
	}
	entries, files, err := s.socks.files()
	if err != nil {
		s.Logger.Error("listener hand-over refused", "error", err)
		return false
	}
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	data, _ := json.Marshal(handoverOffer{PID: os.Getpid(), Listeners: entries})
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	if _, _, err := uc.WriteMsgUnix(data, oob, nil); err != nil {
		s.Logger.Warn("listener hand-over: send", "error", err)
		return false
	}
	// The new edge binds and starts serving; until it says so this edge
	// keeps serving.
	_ = uc.SetDeadline(time.Now().Add(2 * handoverTimeout))
	line, err = br.ReadString('\n')
	if err != nil || line != "serving\n" {
		s.Logger.Warn("listener hand-over: the new edge did not confirm; still serving", "error", err)
		return false
	}
	ok = true
	s.Logger.Info("listeners handed over to the new edge; draining", "listeners", len(entries))
	return true
}
