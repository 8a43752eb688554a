package e2etest

import (
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkLoopbackWriteFloor measures the CPU cost of the one thing the
// frontend cannot avoid per chunk: a ~220-byte write to one of 1024
// loopback TCP connections (the kernel's send path, including the loopback
// delivery it runs in the writer's context). The writer runs on a locked OS
// thread whose CPU time is read with getrusage(RUSAGE_THREAD); readers
// drain the peers on other threads.
//
//	SLUICE_E2E_BIN=bin go test -run XXX -bench LoopbackWriteFloor -benchtime 200000x ./api-frontend/e2etest/
//
// The sub-benchmarks differ in how the bytes reach the socket:
//   - conn: net.Conn.Write (poll.FD lock, entersyscall/exitsyscall), what
//     the frontend did before;
//   - rawwrite: write(2) with syscall.RawSyscall on the descriptor;
//   - rawsend: send(2) with MSG_DONTWAIT|MSG_NOSIGNAL through
//     syscall.RawSyscall6, what the frontend's direct path does: it also
//     skips write(2)'s VFS steps (fdget_pos, rw_verify_area, fsnotify).
func BenchmarkLoopbackWriteFloor(b *testing.B) {
	for _, mode := range []string{"conn", "rawwrite", "rawsend"} {
		b.Run(mode, func(b *testing.B) { loopbackFloor(b, mode) })
	}
}

func loopbackFloor(b *testing.B, mode string) {
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
	var fds []uintptr
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
		rc, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			b.Fatal(err)
		}
		_ = rc.Control(func(fd uintptr) { fds = append(fds, fd) })
	}
	frame := make([]byte, 220)
	for i := range frame {
		frame[i] = 'x'
	}
	p := uintptr(unsafe.Pointer(&frame[0]))
	done := make(chan time.Duration)
	b.ResetTimer()
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var r0, r1 syscall.Rusage
		_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &r0)
		for i := 0; i < b.N; i++ {
			var err error
			switch mode {
			case "conn":
				_, err = cs[i%conns].Write(frame)
			case "rawwrite":
				if _, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fds[i%conns], p, uintptr(len(frame))); e != 0 {
					err = e
				}
			case "rawsend":
				if _, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fds[i%conns], p, uintptr(len(frame)), syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0); e != 0 {
					err = e
				}
			}
			if err == syscall.EAGAIN {
				time.Sleep(time.Millisecond) // let the readers catch up
				continue
			}
			if err != nil {
				b.Error(err)
				break
			}
		}
		_ = syscall.Getrusage(1, &r1)
		cpu := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) * time.Nanosecond
		runtime.KeepAlive(frame)
		done <- cpu
	}()
	cpu := <-done
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-us/write")
}
