package server

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/engineclient"
	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/sse"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/outputproc"
)

// idleTransport is an engine connection that is up and never lags: the
// benchmark below feeds outputs to the sinks itself.
type idleTransport struct {
	outputs chan *ipc.Outputs
	events  chan engineclient.Event
}

func (t *idleTransport) Send(ipc.Kind, any) error          { return nil }
func (t *idleTransport) Outputs() <-chan *ipc.Outputs      { return t.outputs }
func (t *idleTransport) Events() <-chan engineclient.Event { return t.events }
func (t *idleTransport) Ready() (ipc.Ready, bool)          { return ipc.Ready{ModelName: "m"}, true }
func (t *idleTransport) Close()                            {}
func (t *idleTransport) Call(string, []byte, time.Duration) (*ipc.UtilityResult, error) {
	return nil, fmt.Errorf("idle transport: no calls")
}

// BenchmarkStreamOutput is the frontend's own per-token work at stream
// interval 1 without the engine, the HTTP clients or any other process:
// 1024 streams, each a direct (hijacked) loopback TCP connection drained by
// a reader goroutine, take one engine output in turn through
// choice.Output — output processor, detokenization, chunk rendering,
// framing and the one non-blocking send — on a locked OS thread whose user
// and system CPU time (getrusage RUSAGE_THREAD) is reported per token. Next
// to BenchmarkLoopbackWriteFloor (api-frontend/e2etest), the difference is
// what the frontend adds to the send itself. The sends are batched per
// step of one output per stream (flushSends after each, as dispatch does;
// "batched", io_uring where the kernel allows it) or one by one ("off",
// Config.NoSendBatch).
//
//	go test -run XXX -bench StreamOutput -benchtime 300000x ./api-frontend/server/
func BenchmarkStreamOutput(b *testing.B) {
	for _, mode := range []string{"batched", "off"} {
		b.Run(mode, func(b *testing.B) { benchmarkStreamOutput(b, mode == "off") })
	}
}

func benchmarkStreamOutput(b *testing.B, off bool) {
	const streams = 1024
	tr := &idleTransport{outputs: make(chan *ipc.Outputs), events: make(chan engineclient.Event)}
	client := engineclient.New([]engineclient.Transport{tr}, engineclient.Options{})
	srv := New(Config{ServedModelNames: []string{"m"}, NoSendBatch: off}, Deps{Engines: client, Tokenizer: byteTok{}, Chat: simpleChat{}})
	flush := func() {
		if !off {
			srv.flushSends(0)
		}
	}

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
	chs := make([]*choice, streams)
	outs := make([]ipc.Output, streams)
	for i := range chs {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		opts := &openai.Options{N: 1, Logprobs: -1, Stream: true, StreamInterval: 1}
		r := srv.newStream(false, "m", opts, fmt.Sprintf("%08d", i))
		r.state, r.stream = stateRunning, true
		r.buf = *sse.GetBuf()
		r.conn = sse.FromConn(c)
		r.direct, r.send = r.conn.Direct(), r.conn.Sender()
		r.wake = make(chan struct{}, 1)
		ch := r.newChoice(0, []int32{'x'}, outputproc.Options{})
		r.choices, r.remaining = []*choice{ch}, 1
		chs[i] = ch
		outs[i] = ipc.Output{RequestID: ch.engineID, NewTokenIDs: []int32{int32('a' + i%26)}}
	}
	// one token each, so that every stream is past its first token
	for i, ch := range chs {
		ch.Output(&outs[i], time.Now())
	}
	flush()
	done := make(chan [2]time.Duration)
	b.ResetTimer()
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var r0, r1 syscall.Rusage
		_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &r0)
		now := time.Now() // one reading per engine batch in the real dispatch
		for i := 0; i < b.N; i++ {
			ch := chs[i%streams]
			ch.Output(&outs[i%streams], now)
			if (i+1)%streams == 0 || i+1 == b.N {
				flush() // the step's end
			}
			if r := ch.r; len(r.framed) > 0 { // the socket was full: catch up
				r.mu.Lock()
				_ = r.conn.WriteRaw(r.framed)
				r.framed = r.framed[:0]
				r.mu.Unlock()
			}
		}
		_ = syscall.Getrusage(1, &r1)
		done <- [2]time.Duration{
			time.Duration(r1.Utime.Nano() - r0.Utime.Nano()),
			time.Duration(r1.Stime.Nano() - r0.Stime.Nano()),
		}
	}()
	cpu := <-done
	b.StopTimer()
	b.ReportMetric(float64((cpu[0]+cpu[1]).Nanoseconds())/1e3/float64(b.N), "cpu-us/token")
	b.ReportMetric(float64(cpu[0].Nanoseconds())/1e3/float64(b.N), "user-us/token")
	b.ReportMetric(float64(cpu[1].Nanoseconds())/1e3/float64(b.N), "sys-us/token")
	for _, ch := range chs {
		if ch.r.err != nil {
			b.Fatalf("stream failed: %v", ch.r.err.Message)
		}
	}
}
