package zmqtransport

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	zmq "github.com/pebbe/zmq4"
	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/ipc"
)

// ClientConfig configures a frontend's connection to one engine.
type ClientConfig struct {
	// Addr is the engine's endpoint (ipc:///path or tcp://host:port).
	Addr string
	// FrontendID is the DEALER identity; unique per frontend process.
	FrontendID string
	// ModelName, when set, must match the engine's; otherwise the engine
	// rejects the HELLO and the connection stays down.
	ModelName string
	Log       *zap.Logger
	// PingInterval and LivenessTimeout (how long the engine may be silent)
	// default to 250 ms and 3 s.
	PingInterval    time.Duration
	LivenessTimeout time.Duration
	// OutputsBuffer is the capacity of the Outputs channel (default 256).
	OutputsBuffer int
	// Curve, when set, encrypts the connection with CURVE (the engine must
	// be a CURVE server).
	Curve *CurveClient
	// AllowModelChange lets the connection accept an engine that comes back
	// serving a different model. By default the first READY pins the model
	// (name and fingerprint): an engine restarted with another model is
	// refused, the connection stays down, and the reason names both models.
	AllowModelChange bool
}

// ConnEvent reports a change of the engine connection's state.
type ConnEvent struct {
	// Up is true once READY arrived, false when the engine went away
	// (silent, SHUTDOWN, restarted, or rejected the HELLO).
	Up     bool
	Ready  ipc.Ready
	Reason string
}

// EngineConn is a frontend's connection to one engine: a DEALER owned by an
// I/O goroutine, which says HELLO until READY, pings, detects a silent
// engine, and says HELLO again when it returns.
type EngineConn struct {
	cfg     ClientConfig
	log     *zap.Logger
	ctx     *zmq.Context
	dealer  *zmq.Socket
	monitor *zmq.Socket // PAIR receiving the dealer's disconnect events
	push    *zmq.Socket // owned by the sender, guarded by sendMu
	pull    *zmq.Socket
	sendMu  sync.Mutex
	codecMu sync.Mutex
	codec   *ipc.Codec

	outputs chan *ipc.Outputs
	// free holds batches the consumer gave back (Recycle) for the I/O loop
	// to decode the next batch into, so that steady streaming allocates
	// (and collects) no batch per step.
	free   chan *ipc.Outputs
	events chan ConnEvent

	up       atomic.Bool
	ready    atomic.Pointer[ipc.Ready]
	pinned   *ipc.Ready             // the first READY (I/O goroutine only)
	mismatch atomic.Pointer[string] // why the current engine is refused, if it is

	callSeq atomic.Uint64
	callsMu sync.Mutex
	calls   map[uint64]chan *ipc.UtilityResult

	closeOnce sync.Once
	closed    atomic.Bool
	ioDone    chan struct{}
}

// Dial connects to the engine and starts the handshake in the background;
// use Events or Ready to learn when the engine is up.
func Dial(cfg ClientConfig) (*EngineConn, error) {
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = DefaultClientPingInterval
	}
	if cfg.LivenessTimeout <= 0 {
		cfg.LivenessTimeout = DefaultLivenessTimeout
	}
	if cfg.OutputsBuffer <= 0 {
		cfg.OutputsBuffer = 256
	}
	if cfg.FrontendID == "" {
		return nil, fmt.Errorf("zmqtransport: empty frontend id")
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	ctx, err := zmq.NewContext()
	if err != nil {
		return nil, fmt.Errorf("zmq context: %w", err)
	}
	c := &EngineConn{cfg: cfg, log: log, ctx: ctx, codec: ipc.NewCodec(),
		outputs: make(chan *ipc.Outputs, cfg.OutputsBuffer), free: make(chan *ipc.Outputs, cfg.OutputsBuffer+2), events: make(chan ConnEvent, 64),
		calls: map[uint64]chan *ipc.UtilityResult{}, ioDone: make(chan struct{})}
	if c.dealer, err = ctx.NewSocket(zmq.DEALER); err != nil {
		ctx.Term()
		return nil, fmt.Errorf("dealer socket: %w", err)
	}
	c.dealer.SetIdentity(cfg.FrontendID)
	c.dealer.SetSndhwm(0)
	c.dealer.SetRcvhwm(0)
	c.dealer.SetLinger(0)
	c.dealer.SetImmediate(true)
	c.dealer.SetReconnectIvl(100 * time.Millisecond)
	c.dealer.SetReconnectIvlMax(time.Second)
	if cfg.Curve != nil {
		if err := applyCurveClient(c.dealer, cfg.Curve); err != nil {
			c.dealer.Close()
			ctx.Term()
			return nil, err
		}
	}
	if err := c.dealer.Connect(cfg.Addr); err != nil {
		c.dealer.Close()
		ctx.Term()
		return nil, fmt.Errorf("connect %s: %w", cfg.Addr, err)
	}
	// A socket monitor reports a dropped connection at once (a killed
	// engine's ipc/tcp connection closes), so streams fail well before the
	// liveness timeout; liveness still covers a hung (SIGSTOPped) engine.
	monAddr := fmt.Sprintf("inproc://sluice-monitor-%d", inprocSeq.Add(1))
	if err := c.dealer.Monitor(monAddr, zmq.EVENT_DISCONNECTED); err == nil {
		if c.monitor, err = ctx.NewSocket(zmq.PAIR); err == nil {
			if err := c.monitor.Connect(monAddr); err != nil {
				c.monitor.Close()
				c.monitor = nil
			}
		}
	}
	if c.push, c.pull, err = newPair(ctx, "frontend"); err != nil {
		c.dealer.Close()
		ctx.Term()
		return nil, fmt.Errorf("inproc pair: %w", err)
	}
	go c.ioLoop()
	return c, nil
}

// Outputs delivers the engine's per-step batches for this frontend.
func (c *EngineConn) Outputs() <-chan *ipc.Outputs { return c.outputs }

// Recycle gives a batch received from Outputs back for reuse: a later batch
// is decoded into its memory (its slices are overwritten). Call it only
// when nothing keeps a reference into b; batches never given back are
// simply collected.
func (c *EngineConn) Recycle(b *ipc.Outputs) {
	select {
	case c.free <- b:
	default:
	}
}

// Events delivers up/down changes. Buffered; a consumer that does not read
// them misses none of the latest state (Ready reports it too).
func (c *EngineConn) Events() <-chan ConnEvent { return c.events }

// Ready returns the engine's READY facts and whether the engine is up.
func (c *EngineConn) Ready() (ipc.Ready, bool) {
	r := c.ready.Load()
	if r == nil || !c.up.Load() {
		return ipc.Ready{}, false
	}
	return *r, true
}

// Mismatch returns why the engine that answered is refused (it serves
// another model than the first one this connection saw), or "".
func (c *EngineConn) Mismatch() string {
	if p := c.mismatch.Load(); p != nil {
		return *p
	}
	return ""
}

// Send encodes msg and queues it for the engine. It fails with ErrNotReady
// while the engine is not up, so nothing is sent before READY.
func (c *EngineConn) Send(kind ipc.Kind, msg any) error {
	if !c.up.Load() {
		return ErrNotReady
	}
	return c.sendFrame(kind, msg)
}

func (c *EngineConn) sendFrame(kind ipc.Kind, msg any) error {
	if c.closed.Load() {
		return ErrNotReady
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	frame, err := c.codec.Encode(kind, msg)
	if err != nil {
		return err
	}
	if _, err := c.push.SendBytes(frame, 0); err != nil {
		return fmt.Errorf("queue %s: %w", kind, err)
	}
	return nil
}

// Call invokes a utility method on the engine and waits for its result.
func (c *EngineConn) Call(method string, args []byte, timeout time.Duration) (*ipc.UtilityResult, error) {
	id := c.callSeq.Add(1)
	ch := make(chan *ipc.UtilityResult, 1)
	c.callsMu.Lock()
	c.calls[id] = ch
	c.callsMu.Unlock()
	defer func() {
		c.callsMu.Lock()
		delete(c.calls, id)
		c.callsMu.Unlock()
	}()
	if err := c.Send(ipc.KindUtility, &ipc.Utility{CallID: id, Method: method, Args: args}); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.Error != "" {
			return r, fmt.Errorf("engine %s: %s", method, r.Error)
		}
		return r, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("engine %s: no answer within %s", method, timeout)
	}
}

// Close stops the goroutines and closes the socket. Outputs and Events are
// closed afterwards.
func (c *EngineConn) Close() {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.sendMu.Lock()
		c.push.SendBytes(nil, 0) // an empty frame tells the I/O goroutine to stop
		c.sendMu.Unlock()
		<-c.ioDone
		c.sendMu.Lock()
		c.push.Close()
		c.sendMu.Unlock()
		c.ctx.Term()
	})
}

func (c *EngineConn) setDown(reason string) {
	if c.up.Swap(false) {
		c.log.Warn("engine down", zap.String("addr", c.cfg.Addr), zap.String("reason", reason))
		c.emit(ConnEvent{Up: false, Reason: reason})
	}
}

func (c *EngineConn) emit(ev ConnEvent) {
	select {
	case c.events <- ev:
	default: // a consumer that is not listening still sees Ready()
	}
}

// ioLoop owns the dealer, the inproc pull and the monitor. It never blocks
// in a cgo call: it waits in a select on its sockWaiters (the sockets'
// ZMQ_FDs in Go's network poller) and a housekeeping timer, and then drains
// every socket with non-blocking calls until none is readable. (A goroutine
// parked in a long cgo zmq_poll holds its P in a syscall: the runtime's
// sysmon then never sleeps deeply, and every 10 ms it retakes that P and
// restarts polling every 20 µs, which cost the frontend about 2,000 sysmon
// wake-ups a second under load.)
func (c *EngineConn) ioLoop() {
	defer close(c.ioDone)
	defer close(c.events)
	defer close(c.outputs)
	defer c.dealer.Close()
	defer c.pull.Close()
	if c.monitor != nil {
		defer c.monitor.Close()
	}
	// Deferred after the sockets' Close, so run before it: the waiters let
	// go of their descriptors first.
	dealerW := c.waiter(c.dealer, "dealer")
	defer dealerW.close()
	pullW := c.waiter(c.pull, "inproc pull")
	defer pullW.close()
	var monC chan struct{} // nil (never ready) without a monitor
	if c.monitor != nil {
		monW := c.waiter(c.monitor, "monitor")
		defer monW.close()
		monC = monW.C
	}
	timer := time.NewTimer(housekeepingMax)
	defer timer.Stop()
	codec := ipc.NewCodec()
	hello := &ipc.Hello{ProtocolVersion: ipc.ProtocolVersion, FrontendID: c.cfg.FrontendID, PID: os.Getpid(), ModelName: c.cfg.ModelName}
	var lastHello, lastPing, lastSeen time.Time
	sendDirect := func(kind ipc.Kind, msg any) {
		frame, err := codec.Encode(kind, msg)
		if err == nil {
			c.dealer.SendBytes(frame, zmq.DONTWAIT) // EAGAIN while unconnected: retried later
		}
	}
	rejected := ""
	for {
		t := time.Now()
		if !c.up.Load() && t.Sub(lastHello) >= 200*time.Millisecond {
			lastHello = t
			sendDirect(ipc.KindHello, hello)
		}
		if c.up.Load() {
			if t.Sub(lastPing) >= c.cfg.PingInterval {
				lastPing = t
				sendDirect(ipc.KindPing, &ipc.Ping{Time: now()})
			}
			if t.Sub(lastSeen) > c.cfg.LivenessTimeout {
				c.setDown(fmt.Sprintf("engine silent for %s", c.cfg.LivenessTimeout))
			}
		}
		// Drain until a whole pass finds nothing: handling one socket sends
		// on the dealer, and a zmq call may consume another ZMQ_FD edge, so
		// every socket's last call before the wait must be a GetEvents that
		// saw no POLLIN.
		for busy := true; busy; {
			busy = false
			if c.monitor != nil && readable(c.monitor) {
				busy = true
				for {
					ev, _, _, err := c.monitor.RecvEvent(zmq.DONTWAIT)
					if err != nil {
						break
					}
					if ev == zmq.EVENT_DISCONNECTED {
						c.setDown("engine connection lost")
						lastHello = time.Time{}
					}
				}
			}
			if readable(c.pull) {
				busy = true
				for {
					frame, err := c.pull.RecvBytes(zmq.DONTWAIT)
					if err != nil {
						break
					}
					if len(frame) == 0 {
						return
					}
					if c.up.Load() {
						if _, err := c.dealer.SendBytes(frame, zmq.DONTWAIT); err != nil {
							c.setDown("send failed: " + err.Error())
						}
					}
				}
			}
			if !readable(c.dealer) {
				continue
			}
			busy = true
			for {
				frame, err := c.dealer.RecvBytes(zmq.DONTWAIT)
				if err != nil {
					break
				}
				lastSeen = time.Now()
				if len(frame) > 0 && ipc.Kind(frame[0]) == ipc.KindOutputs {
					var b *ipc.Outputs
					select {
					case b = <-c.free:
					default:
						b = &ipc.Outputs{}
					}
					if err := codec.DecodeInto(frame, b); err != nil {
						c.log.Warn("bad frame from engine", zap.Error(err))
						continue
					}
					c.outputs <- b
					continue
				}
				kind, msg, err := codec.Decode(frame)
				if err != nil {
					c.log.Warn("bad frame from engine", zap.Error(err))
					continue
				}
				switch kind {
				case ipc.KindOutputs:
					c.outputs <- msg.(*ipc.Outputs)
				case ipc.KindPing:
					sendDirect(ipc.KindPong, msg)
				case ipc.KindPong:
				case ipc.KindReady:
					r := msg.(*ipc.Ready)
					if prev := c.ready.Load(); prev != nil && c.up.Load() && prev.EngineID == r.EngineID && prev.PID == r.PID {
						continue // duplicate answer to a retried HELLO
					}
					if pin := c.pinned; pin != nil && !c.cfg.AllowModelChange &&
						(pin.ModelName != r.ModelName || pin.ModelFingerprint != r.ModelFingerprint) {
						reason := fmt.Sprintf("engine at %s now serves model %q (fingerprint %q), but this frontend serves %q (fingerprint %q): restart the frontend for the new model",
							c.cfg.Addr, r.ModelName, r.ModelFingerprint, pin.ModelName, pin.ModelFingerprint)
						c.up.Store(false)
						c.mismatch.Store(&reason)
						if reason != rejected {
							rejected = reason
							c.log.Error("engine model changed; refusing it", zap.String("reason", reason))
							c.emit(ConnEvent{Up: false, Reason: reason})
						}
						lastHello = time.Now().Add(2 * time.Second) // keep asking, slowly
						continue
					}
					c.mismatch.Store(nil)
					if c.pinned == nil {
						pinned := *r
						c.pinned = &pinned
					}
					if c.up.Load() {
						c.setDown("engine restarted")
					}
					c.ready.Store(r)
					rejected = ""
					c.up.Store(true)
					lastPing = time.Time{}
					c.log.Info("engine ready", zap.String("addr", c.cfg.Addr), zap.String("engine", r.EngineID), zap.String("model", r.ModelName))
					c.emit(ConnEvent{Up: true, Ready: *r})
				case ipc.KindShutdown:
					c.setDown("engine shutting down: " + msg.(*ipc.Shutdown).Reason)
					lastHello = time.Now().Add(300 * time.Millisecond) // let it go before saying HELLO again
				case ipc.KindReject:
					reason := msg.(*ipc.Reject).Reason
					c.setDown("engine rejected this frontend: " + reason)
					if reason != ReasonUnknownSession && reason != rejected {
						rejected = reason
						c.log.Error("engine rejected HELLO", zap.String("reason", reason))
					}
				case ipc.KindUtilityResult:
					r := msg.(*ipc.UtilityResult)
					c.callsMu.Lock()
					ch := c.calls[r.CallID]
					c.callsMu.Unlock()
					if ch != nil {
						ch <- r
					}
				}
			}
		}
		// Sleep until the next HELLO retry, ping or liveness deadline.
		next := time.Now().Add(housekeepingMax)
		if !c.up.Load() {
			next = minTime(next, lastHello.Add(200*time.Millisecond))
		} else {
			next = minTime(next, lastPing.Add(c.cfg.PingInterval))
			next = minTime(next, lastSeen.Add(c.cfg.LivenessTimeout+time.Millisecond))
		}
		timer.Reset(time.Until(next))
		select {
		case <-dealerW.C:
		case <-pullW.C:
		case <-monC:
		case <-timer.C:
		}
	}
}

// housekeepingMax bounds how long the I/O goroutine sleeps without traffic;
// it wakes earlier for the next HELLO retry, ping or liveness deadline.
const housekeepingMax = time.Second

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// waiter starts a sockWaiter for one of the I/O goroutine's sockets.
func (c *EngineConn) waiter(sock *zmq.Socket, name string) *sockWaiter {
	w, err := newSockWaiter(sock)
	if err != nil {
		c.log.Warn("zmq socket wait falls back to polling every "+fallbackTick.String(), zap.String("socket", name), zap.Error(err))
	}
	return w
}
