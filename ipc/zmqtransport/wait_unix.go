//go:build unix

package zmqtransport

import "syscall"

// dupFd duplicates fd close-on-exec and non-blocking (zmq's signaler
// descriptors are non-blocking already; the flag is shared with zmq's copy).
func dupFd(fd int) (int, error) {
	syscall.ForkLock.RLock()
	dup, err := syscall.Dup(fd)
	if err == nil {
		syscall.CloseOnExec(dup)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1, err
	}
	if err := syscall.SetNonblock(dup, true); err != nil {
		syscall.Close(dup)
		return -1, err
	}
	return dup, nil
}
