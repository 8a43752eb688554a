package serve

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/bench/stub"
	"go.uber.org/goleak"
)

// stubAddrEnv, when set, turns the test binary into a stub server on that
// address (see TestMain), so the client benchmark can measure this process's
// CPU without the server's.
const stubAddrEnv = "SLUICE_BENCH_STUB_ADDR"

func TestMain(m *testing.M) {
	if addr := os.Getenv(stubAddrEnv); addr != "" {
		interval, _ := strconv.Atoi(os.Getenv("SLUICE_BENCH_STUB_INTERVAL_MS"))
		srv := &http.Server{Addr: addr, ReadHeaderTimeout: 10 * time.Second, Handler: stub.New(stub.Options{
			FirstDelay: 50 * time.Millisecond, Interval: time.Duration(interval) * time.Millisecond,
		})}
		if err := srv.ListenAndServe(); err != nil {
			fmt.Fprintln(os.Stderr, "stub server:", err)
			os.Exit(1)
		}
		return
	}
	goleak.VerifyTestMain(m)
}

// startStubProcess runs the stub server in a child process and returns its
// base URL.
func startStubProcess(b *testing.B, intervalMS int) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), stubAddrEnv+"="+addr, "SLUICE_BENCH_STUB_INTERVAL_MS="+strconv.Itoa(intervalMS))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatal("stub server did not start")
	return ""
}

// BenchmarkClientStreams measures the benchmark client's own CPU while it
// drives 1024 concurrent streams of 200 one-token chunks from a stub server
// in a separate process. Reported: client-cores (CPU time / wall time of
// this process during the run) and client-cpu-ns/token.
//
//	go test ./bench/serve -run '^$' -bench ClientStreams -benchtime 3x
func BenchmarkClientStreams(b *testing.B) {
	for _, intervalMS := range []int{10, 20} {
		b.Run(fmt.Sprintf("streams=1024/interval=%dms", intervalMS), func(b *testing.B) {
			url := startStubProcess(b, intervalMS)
			o := DefaultOptions()
			o.BaseURL, o.Model = url, "stub"
			o.NumPrompts, o.MaxConcurrency = 1024, 1024
			o.RandomInputLen, o.RandomOutputLen = 128, 200
			o.DisableProgress, o.ReadyTimeoutSec = true, 0
			var cores, nsPerTok, medITL float64
			for b.Loop() {
				res, err := Run(context.Background(), o, io.Discard, io.Discard)
				if err != nil {
					b.Fatal(err)
				}
				if res.Summary.Failed > 0 {
					b.Fatalf("%d requests failed", res.Summary.Failed)
				}
				cores += res.ClientCores
				nsPerTok += res.ClientCPUSeconds * 1e9 / float64(res.Summary.TotalOutput)
				medITL += res.Summary.Dists["itl"].Median
			}
			n := float64(b.N)
			b.ReportMetric(cores/n, "client-cores")
			b.ReportMetric(nsPerTok/n, "client-cpu-ns/token")
			b.ReportMetric(medITL/n, "median-itl-ms")
		})
	}
}
