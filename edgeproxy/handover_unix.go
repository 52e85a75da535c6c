//go:build unix

package edgeproxy

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// handoverSockMax is the longest socket path used as is: sun_path holds
// 104 bytes on the BSDs and 108 on Linux, with the terminating NUL.
const handoverSockMax = 100

// handoverAddr returns the address of the hand-over socket
// <state>/edge/handover.sock and a release to call once the socket is
// bound or connected. The socket is never abstract (an abstract name has
// no permissions, and every process in the network namespace can reach
// it). A path too long for a socket address is reached through a
// descriptor of <state>/edge (/proc/self/fd/<n>/handover.sock on Linux),
// so the socket stays in the state directory, the one place two edge
// containers share; without /proc it is a socket in a private directory
// (privateHandoverDir). The error says what to do.
func handoverAddr(stateDir string) (string, func(), error) {
	dir := filepath.Join(stateDir, "edge")
	p := filepath.Join(dir, HandoverFile)
	if len(p) < handoverSockMax {
		return p, func() {}, nil
	}
	if d, err := os.Open(dir); err == nil {
		short := fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), HandoverFile)
		if _, err := os.Stat(filepath.Dir(short)); err == nil {
			return short, func() { _ = d.Close() }, nil
		}
		_ = d.Close()
	}
	private, err := privateHandoverDir(p)
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(private, HandoverFile), func() {}, nil
}

// privateHandoverDir returns the directory for the hand-over socket of
// the too long path p where /proc is missing: gordon-edge-<uid>-<hash of
// p> under $XDG_RUNTIME_DIR or else the temporary directory, created 0700.
// It refuses a directory that is a symbolic link, is not owned by this
// process's user or is open to others (someone else made it first).
func privateHandoverDir(p string) (string, error) {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if base == "" {
		base = os.TempDir()
	}
	h := sha256.Sum256([]byte(p))
	dir := filepath.Join(base, fmt.Sprintf("gordon-edge-%d-%s", os.Getuid(), hex.EncodeToString(h[:8])))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("hand-over directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("hand-over directory %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm() != 0o700 {
		return "", fmt.Errorf("hand-over directory %s is not a private directory of this user (mode 0700): remove it, or use a shorter --state-dir", dir)
	}
	return dir, nil
}

// takeOver asks the edge serving the same state directory for its
// listeners, and takes them only from a process of this edge's user or
// root (checkPeer). It returns nil, nil when no edge answers (none runs, or the
// socket is stale); the connection is kept open for confirm.
func (s *Server) takeOver() (*net.UnixConn, error) {
	path, release, err := handoverAddr(s.cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("listener hand-over: %w", err)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	release()
	if err != nil {
		return nil, nil // nobody to take over from
	}
	uc := c.(*net.UnixConn)
	if err := checkPeer(uc); err != nil {
		_ = uc.Close()
		return nil, fmt.Errorf("listener hand-over: refused the edge answering on %s: %w", path, err)
	}
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
// (then handedOver is closed) or ln closes. It answers only a process of
// this edge's user or root (checkPeer).
func (s *Server) listenHandover() (net.Listener, error) {
	path, release, err := handoverAddr(s.cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("gordon-edge: hand-over socket: %w", err)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	release()
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
	if err := checkPeer(uc); err != nil {
		s.Logger.Warn("listener hand-over refused", "error", err)
		return false
	}
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

// checkPeer admits the process at the other end of a hand-over connection
// when it runs as this edge's user or as root, on either end (the edge
// handing its listeners over and the edge taking them): another user can
// neither take the listeners nor hand in descriptors of its own.
func checkPeer(uc *net.UnixConn) error {
	uid, pid, err := peerUID(uc)
	if err != nil {
		return fmt.Errorf("cannot read the peer's credentials: %w", err)
	}
	if own := os.Getuid(); uid != 0 && int64(uid) != int64(own) {
		return fmt.Errorf("the peer (pid %d) runs as uid %d, neither this edge's user (uid %d) nor root", pid, uid, own)
	}
	return nil
}
