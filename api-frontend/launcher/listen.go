package launcher

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Listen opens a TCP listener on host:port with SO_REUSEPORT and
// SO_REUSEADDR set, so several frontend processes (of the same user) can each
// listen on the same port and the kernel spreads incoming connections over
// them. Port 0 picks a free port. An empty host listens on every address.
func Listen(host string, port int) (net.Listener, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	lc := net.ListenConfig{Control: reusePort}
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}

// reusePort sets SO_REUSEADDR and SO_REUSEPORT on the socket before bind.
func reusePort(network, address string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
			serr = fmt.Errorf("set SO_REUSEADDR: %w", serr)
			return
		}
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); serr != nil {
			serr = fmt.Errorf("set SO_REUSEPORT: %w", serr)
		}
	})
	if err != nil {
		return fmt.Errorf("socket control: %w", err)
	}
	return serr
}
