package e2etest

import (
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// BenchmarkLoopbackWriteFloor measures the CPU cost of the one thing the
// frontend cannot avoid per chunk: a ~220-byte write to one of 1024
// loopback TCP connections (the kernel's send path, including the loopback
// delivery it runs in the writer's context). The writer runs on a locked OS
// thread whose CPU time is read with getrusage(RUSAGE_THREAD); readers
// drain the peers on other threads.
//
//	SLUICE_E2E_BIN=bin go test -run XXX -bench LoopbackWriteFloor -benchtime 200000x ./api-frontend/e2etest/
func BenchmarkLoopbackWriteFloor(b *testing.B) {
	const conns = 1024
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	var cs []net.Conn
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	frame := make([]byte, 220)
	for i := range frame {
		frame[i] = 'x'
	}
	done := make(chan time.Duration)
	b.ResetTimer()
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var r0, r1 syscall.Rusage
		_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &r0)
		for i := 0; i < b.N; i++ {
			if _, err := cs[i%conns].Write(frame); err != nil {
				b.Error(err)
				break
			}
		}
		_ = syscall.Getrusage(1, &r1)
		cpu := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) * time.Nanosecond
		done <- cpu
	}()
	cpu := <-done
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-us/write")
}
