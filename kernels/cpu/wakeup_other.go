//go:build !linux

package cpu

import "sync/atomic"

// haveFutex reports whether wakeup can sleep on a futex (Linux only).
const haveFutex = false

// futexWait is not called where haveFutex is false.
func futexWait(*atomic.Uint32, uint32) { panic("cpu: no futex on this system") }

// futexWake is not called where haveFutex is false.
func futexWake(*atomic.Uint32) { panic("cpu: no futex on this system") }
