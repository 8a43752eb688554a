package cpu

import (
	"math"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// haveFutex reports whether wakeup can sleep on a futex (Linux).
const haveFutex = true

const (
	futexWaitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

// futexWait blocks the thread while *addr == v. It goes through
// syscall.Syscall, so the runtime sees a blocking system call: the
// goroutine's processor is handed to other goroutines while it sleeps and
// a stop-the-world (GC) does not wait for it. EAGAIN (the word changed
// first), EINTR and spurious returns all just return.
func futexWait(addr *atomic.Uint32, v uint32) {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitPrivate, uintptr(v), 0, 0, 0)
}

// futexWake wakes every thread blocked in futexWait on addr.
func futexWake(addr *atomic.Uint32) {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakePrivate, math.MaxInt32, 0, 0, 0)
}
