package launcher

import (
	"net"
	"sync"
	"testing"
	"time"
)

// TestListenSharesPort opens two listeners on one port and checks that the
// kernel hands connections to both.
func TestListenSharesPort(t *testing.T) {
	a, err := Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	port := a.Addr().(*net.TCPAddr).Port
	b, err := Listen("127.0.0.1", port)
	if err != nil {
		t.Fatalf("second listener on port %d: %v", port, err)
	}
	defer b.Close()

	var mu sync.Mutex
	accepted := map[net.Listener]int{}
	var wg sync.WaitGroup
	for _, ln := range []net.Listener{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				accepted[ln]++
				mu.Unlock()
				c.Close()
			}
		}()
	}
	// Each connection comes from a new source port, so the reuseport hash
	// spreads them; 64 connections all landing on one side has odds 2^-63.
	for range 64 {
		c, err := net.DialTimeout("tcp", a.Addr().String(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Read(make([]byte, 1)) // wait for the server side's close
		c.Close()
	}
	a.Close()
	b.Close()
	wg.Wait()
	if accepted[a] == 0 || accepted[b] == 0 || accepted[a]+accepted[b] != 64 {
		t.Fatalf("accepts per listener: %d and %d, want both > 0 and 64 in all", accepted[a], accepted[b])
	}
}

// TestListenRefusesPortHeldWithoutReuse checks the early failure Run relies
// on: a port held by a socket without SO_REUSEPORT cannot be joined.
func TestListenRefusesPortHeldWithoutReuse(t *testing.T) {
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	port := plain.Addr().(*net.TCPAddr).Port
	if ln, err := Listen("127.0.0.1", port); err == nil {
		ln.Close()
		t.Fatalf("Listen joined port %d held without SO_REUSEPORT", port)
	}
	if _, err := checkPort("127.0.0.1", port); err == nil {
		t.Fatal("checkPort accepted a port held without SO_REUSEPORT")
	}
}

func TestCheckPortResolvesZero(t *testing.T) {
	p, err := checkPort("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p <= 0 || p > 65535 {
		t.Fatalf("checkPort(0) = %d", p)
	}
}
