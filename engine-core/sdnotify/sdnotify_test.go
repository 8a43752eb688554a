package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
)

func TestNotify(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify(Ready); sent || err != nil {
		t.Fatalf("without NOTIFY_SOCKET: sent=%v err=%v", sent, err)
	}
	path := filepath.Join(t.TempDir(), "notify.sock")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	if sent, err := Notify(Ready); !sent || err != nil {
		t.Fatalf("sent=%v err=%v", sent, err)
	}
	buf := make([]byte, 64)
	n, _, err := l.ReadFromUnix(buf)
	if err != nil || string(buf[:n]) != Ready {
		t.Fatalf("got %q %v", buf[:n], err)
	}
}
