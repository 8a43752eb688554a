// Package zmqtransport carries ipc frames between engine-core and the
// api-frontends over ZeroMQ (github.com/pebbe/zmq4, real libzmq).
//
// The engine binds one ROUTER (EngineSocket); every frontend connects a
// DEALER whose identity is its frontend id (EngineConn). A zmq socket is not
// goroutine-safe, so each socket has one owner:
//   - engine: an I/O goroutine owns the ROUTER and waits on it together with
//     an inproc PULL (in Go's network poller, through the sockets' ZMQ_FDs:
//     see sockWaiter); senders hand encoded frames to an output goroutine
//     that pushes them through the inproc pair. The engine's step loop
//     therefore never waits on the network.
//   - frontend: a C thread (cPump, cpump.c) owns the DEALER and its monitor
//     and trades frames with the I/O goroutine through rings in C memory,
//     so that receiving a step's batch makes no cgo call (the first cgo call
//     after an idle spell wakes Go's sysmon into 20 µs polling: see cPump).
//
// The handshake is HELLO → READY; nothing but HELLO is sent before READY
// (connecting to a stale ipc socket before the engine binds silently loses
// messages, so HELLO is retried until answered). Both sides PING every
// second; a peer silent for the liveness timeout (3 s) is gone.
package zmqtransport

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/sluice-llm/sluice/ipc"
)

// Defaults for liveness. Frontends ping often (4/s: a few bytes each) and the
// engine drops a frontend silent for 2.5 s, so a killed frontend's requests
// are freed within 3 s of its death; the engine pings each frontend every
// second and a frontend gives an engine 3 s (a killed engine is noticed at
// once anyway, through the socket monitor).
const (
	DefaultPingInterval            = time.Second
	DefaultClientPingInterval      = 250 * time.Millisecond
	DefaultLivenessTimeout         = 3 * time.Second
	DefaultFrontendLivenessTimeout = 2500 * time.Millisecond
)

// KindFrontendGone is a synthetic kind (never on the wire) delivered on the
// engine's Inbound channel when a frontend went silent or was replaced.
const KindFrontendGone ipc.Kind = 200

var inprocSeq atomic.Uint64

// now returns unix seconds as a float, the wire's timestamp unit.
func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// newPair creates a connected inproc PUSH (for the output goroutine) and PULL
// (for the I/O goroutine).
func newPair(ctx *zmq.Context, name string) (push, pull *zmq.Socket, err error) {
	addr := fmt.Sprintf("inproc://sluice-%s-%d", name, inprocSeq.Add(1))
	if pull, err = ctx.NewSocket(zmq.PULL); err != nil {
		return nil, nil, err
	}
	pull.SetRcvhwm(0)
	if err = pull.Bind(addr); err != nil {
		pull.Close()
		return nil, nil, err
	}
	if push, err = ctx.NewSocket(zmq.PUSH); err != nil {
		pull.Close()
		return nil, nil, err
	}
	push.SetSndhwm(0)
	push.SetLinger(0)
	if err = push.Connect(addr); err != nil {
		pull.Close()
		push.Close()
		return nil, nil, err
	}
	return push, pull, nil
}

// prepareIPC makes the directory of an ipc:// endpoint private (0700) and
// removes a stale socket file left by an earlier run.
func prepareIPC(addr string) error {
	path, ok := strings.CutPrefix(addr, "ipc://")
	if !ok {
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create ipc directory %s: %w", dir, err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	return nil
}

// secureIPC restricts a bound ipc:// socket file to its owner.
func secureIPC(addr string) error {
	path, ok := strings.CutPrefix(addr, "ipc://")
	if !ok {
		return nil
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("chmod ipc socket %s: %w", path, err)
	}
	return nil
}

// removeIPC unlinks an ipc:// socket file on shutdown.
func removeIPC(addr string) {
	if path, ok := strings.CutPrefix(addr, "ipc://"); ok {
		_ = os.Remove(path)
	}
}
