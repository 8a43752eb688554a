package testproc

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartOutputKill(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(p *Proc)
		want string
	}{
		{"kill", func(p *Proc) { p.Kill() }, "hello"},
		{"sigterm", func(p *Proc) { p.Signal(syscall.SIGTERM); <-p.Exited() }, "hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Start(t, "/bin/sh", Options{Env: []string{"TESTPROC_WORD=hello"}}, "-c", "echo $TESTPROC_WORD; exec sleep 30")
			WaitFor(t, 10*time.Second, "output", func() (bool, string) {
				return strings.Contains(p.Output(), tc.want), p.Output()
			})
			if !p.Alive() || p.Pid() <= 0 {
				t.Fatalf("alive %v pid %d, want a running process", p.Alive(), p.Pid())
			}
			tc.stop(p)
			if p.Alive() {
				t.Fatal("process still alive after stop")
			}
		})
	}
}

func TestWaitHealth(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	WaitHealth(t, srv.URL, http.StatusServiceUnavailable, 5*time.Second)
	if code, err := HealthCode(srv.URL); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("HealthCode = %d, %v; want 503", code, err)
	}
}

func TestFreePortTail(t *testing.T) {
	port := FreePort(t)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", port, err)
	}
	l.Close()
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{{"abcdef", 3, "…def"}, {"abc", 3, "abc"}, {"", 3, ""}} {
		if got := Tail(tc.s, tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
