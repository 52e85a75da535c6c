//go:build linux

package evloop

import (
	"io"
	"net"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The epoll data of a registration: Fd is the descriptor, Pad its kind
// (the low TagBits bits: TagClient, TagUp or TagWake) and the
// registration's serial number (the rest), so an event still queued for a
// descriptor closed earlier in the same batch is not taken for one that
// was given the same number since.
const (
	TagClient int32 = iota
	TagUp
	TagWake
	TagBits = 2
)

// Tag returns the kind (TagClient, TagUp or TagWake) of an event's Pad.
func Tag(pad int32) int32 { return pad & (1<<TagBits - 1) }

// Poller is one event loop's epoll set and the eventfd that interrupts
// its wait. Only the loop's goroutine calls its methods, except Adopt and
// Signal, which any goroutine may call.
type Poller struct {
	ep int
	// wake is an eventfd that interrupts epoll_wait (Adopt, Signal).
	wake  int
	mu    sync.Mutex
	inbox []int
	dead  bool // under mu: Close has run (the eventfd is closed)

	events []unix.EpollEvent
	serial int32
}

// New returns a Poller whose Wait reports at most maxEvents events at a
// time. The error is the failed system call (epoll_create1, eventfd or
// epoll_ctl) as an *os.SyscallError; nothing is left open then.
func New(maxEvents int) (*Poller, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		_ = unix.Close(ep)
		return nil, os.NewSyscallError("eventfd", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake), Pad: TagWake}); err != nil {
		_ = unix.Close(ep)
		_ = unix.Close(wake)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return &Poller{ep: ep, wake: wake, events: make([]unix.EpollEvent, maxEvents)}, nil
}

// NextSerial returns the epoll data Pad of a new registration of kind tag.
func (p *Poller) NextSerial(tag int32) int32 {
	p.serial = (p.serial + 1) & (1<<(31-TagBits) - 1)
	return p.serial<<TagBits | tag
}

// Add registers fd for events (EPOLLIN, EPOLLET, ...) with epoll data
// pad (from NextSerial). The error is epoll_ctl's errno, unwrapped.
func (p *Poller) Add(fd int, events uint32, pad int32) error {
	return unix.EpollCtl(p.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: events, Fd: int32(fd), Pad: pad})
}

// Adopt queues fd (a descriptor the caller gives up) for the loop's next
// TakeInbox and wakes the loop; from closes (before the loop can take fd)
// what fd was duplicated from. It reports false, fd and from untouched,
// when the Poller is closed: the caller keeps both.
func (p *Poller) Adopt(fd int, from io.Closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return false
	}
	_ = from.Close()
	p.inbox = append(p.inbox, fd)
	p.signalLocked()
	return true
}

// Signal interrupts the loop's wait (a TagWake event), unless the Poller
// is closed.
func (p *Poller) Signal() {
	p.mu.Lock()
	p.signalLocked()
	p.mu.Unlock()
}

func (p *Poller) signalLocked() {
	if !p.dead {
		one := [8]byte{1}
		_, _ = unix.Write(p.wake, one[:])
	}
}

// ClearWake consumes the wake-ups that made a TagWake event.
func (p *Poller) ClearWake() {
	var b [8]byte
	_, _ = unix.Read(p.wake, b[:])
}

// TakeInbox returns the descriptors Adopt queued since the last call (nil:
// none); the loop owns them now.
func (p *Poller) TakeInbox() []int {
	p.mu.Lock()
	fds := p.inbox
	p.inbox = nil
	p.mu.Unlock()
	return fds
}

// InboxEmpty reports whether no descriptor waits for TakeInbox.
func (p *Poller) InboxEmpty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.inbox) == 0
}

// Wait returns the next events: it first waits at most rawMs milliseconds
// in a raw system call that keeps the thread's P (0: only looks), then,
// when none came, at most ms milliseconds in an ordinary wait. The slice
// is the Poller's, valid until the next Wait. The error is epoll_wait's
// errno (EINTR: no events, wait again).
func (p *Poller) Wait(rawMs, ms int) ([]unix.EpollEvent, error) {
	n, err := epollWaitRaw(p.ep, p.events, rawMs)
	if err == nil && n == 0 {
		n, err = unix.EpollWait(p.ep, p.events, ms)
	}
	return p.events[:max(n, 0)], err
}

// Close closes the epoll set and the eventfd; Adopt fails from then on.
// It returns the descriptors queued and not taken, which the caller closes.
func (p *Poller) Close() []int {
	p.mu.Lock()
	p.dead = true
	fds := p.inbox
	p.inbox = nil
	p.mu.Unlock()
	_ = unix.Close(p.ep)
	_ = unix.Close(p.wake)
	return fds
}

// Release takes fd off the loop as a net.Conn on Go's poller (fd itself is
// closed; the conn has a duplicate). The error is net.FileConn's.
func (p *Poller) Release(fd int) (net.Conn, error) {
	_ = unix.EpollCtl(p.ep, unix.EPOLL_CTL_DEL, fd, nil)
	f := os.NewFile(uintptr(fd), "")
	nc, err := net.FileConn(f)
	_ = f.Close()
	return nc, err
}

// Raw system calls skip the scheduler's entersyscall/exitsyscall: reads
// and writes of non-blocking descriptors never block, and epollWaitRaw
// blocks for at most a few milliseconds (a signal, such as the runtime's
// preemption, ends it early with EINTR).

func epollWaitRaw(ep int, evs []unix.EpollEvent, ms int) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(ep), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), uintptr(ms), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// RawRead reads into p (len(p) > 0) from non-blocking fd: the bytes read
// (0: end of file) or the errno (unix.EAGAIN: nothing to read now).
func RawRead(fd int, p []byte) (int, error) { return rawRW(unix.SYS_READ, fd, p) }

// RawWrite writes p (len(p) > 0) to non-blocking fd: the bytes written
// (possibly fewer) or the errno (unix.EAGAIN: no room now).
func RawWrite(fd int, p []byte) (int, error) { return rawRW(unix.SYS_WRITE, fd, p) }

func rawRW(trap uintptr, fd int, p []byte) (int, error) {
	r, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
