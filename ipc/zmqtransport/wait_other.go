//go:build !unix

package zmqtransport

import "errors"

// dupFd is unsupported here: sockWaiter falls back to a ticker.
func dupFd(int) (int, error) {
	return -1, errors.New("ZMQ_FD polling is implemented for unix only")
}
