// Package sdnotify tells systemd about the engine's state (Type=notify units):
// READY=1 once the model is loaded and the socket is bound, STOPPING=1 on
// drain. It speaks the sd_notify datagram protocol directly (a few lines) rather
// than linking libsystemd, and does nothing when NOTIFY_SOCKET is unset.
package sdnotify

import (
	"fmt"
	"net"
	"os"
)

// Ready is the message for a service that finished starting.
const Ready = "READY=1"

// Stopping is the message for a service that began shutting down.
const Stopping = "STOPPING=1"

// Notify sends state to the socket named by $NOTIFY_SOCKET. It reports
// whether a notification was sent (false when not run by systemd).
func Notify(state string) (bool, error) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return false, nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:] // abstract namespace
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sd_notify dial %s: %w", os.Getenv("NOTIFY_SOCKET"), err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sd_notify write: %w", err)
	}
	return true, nil
}
