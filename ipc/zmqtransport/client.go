package zmqtransport

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

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
	// LibZMQ makes the connection use libzmq's DEALER on a C pump thread
	// (cPump) rather than ZMTP spoken in Go (goPump). CURVE, and endpoints
	// other than ipc:// and tcp://host:port, always use libzmq.
	LibZMQ bool
}

// ConnEvent reports a change of the engine connection's state (up with its
// READY facts, or down with a reason: silent, parked, SHUTDOWN, restarted,
// or the HELLO refused). It is ipc.ConnEvent, so that EngineConn satisfies
// the frontend's engineclient.EngineConn interface without an adapter.
type ConnEvent = ipc.ConnEvent

// EngineConn is a frontend's connection to one engine: a DEALER (ZMTP in
// Go, goPump, or libzmq's on a C pump thread, cPump), an I/O goroutine, which says HELLO until
// READY, detects a silent engine, and says HELLO again when it returns, and
// a ping goroutine, which keeps the engine's liveness check fed even while
// the I/O goroutine waits for a busy consumer.
type EngineConn struct {
	cfg    ClientConfig
	log    *zap.Logger
	pump   pump
	sendMu sync.Mutex // guards codec
	codec  *ipc.Codec
	stop   chan struct{} // closed by Close
	// pingKick wakes pingLoop for an immediate PING (capacity 1).
	pingKick chan struct{}
	pingDone chan struct{} // closed when pingLoop returns

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

	// session is this connection's random session id, sent in every HELLO:
	// the engine resumes (rather than aborts) the requests of a session that
	// says HELLO again. Once the connection went down its consumer failed
	// every request, so the next HELLO carries a new session (newSession
	// set), and the engine aborts the old requests.
	session    string
	newSession atomic.Bool
	// muted is a test hook: while set, the frontend sends no PING and no
	// PONG, as if it were frozen, so the engine parks it.
	muted atomic.Bool
}

// randomSession returns a random session id.
func randomSession() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
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
	c := &EngineConn{cfg: cfg, log: log, codec: ipc.NewCodec(), stop: make(chan struct{}), pingKick: make(chan struct{}, 1), pingDone: make(chan struct{}),
		outputs: make(chan *ipc.Outputs, cfg.OutputsBuffer), free: make(chan *ipc.Outputs, cfg.OutputsBuffer+2), events: make(chan ConnEvent, 64),
		calls: map[uint64]chan *ipc.UtilityResult{}, ioDone: make(chan struct{})}
	var err error
	if c.session, err = randomSession(); err != nil {
		return nil, err
	}
	if _, _, ok := goPumpAddr(cfg.Addr); ok && cfg.Curve == nil && !cfg.LibZMQ {
		p, err := newGoPump(cfg.Addr, cfg.FrontendID, cfg.LivenessTimeout)
		if err != nil {
			return nil, fmt.Errorf("connect %s: %w", cfg.Addr, err)
		}
		c.pump = p
		log.Info("engine link", zap.String("addr", cfg.Addr), zap.String("link", "zmtp"))
	} else {
		p, err := dialCPump(cfg)
		if err != nil {
			return nil, err
		}
		c.pump = p
		log.Info("engine link", zap.String("addr", cfg.Addr), zap.String("link", "libzmq"))
	}
	go c.pingLoop()
	go c.ioLoop()
	return c, nil
}

// dialCPump connects through libzmq on a C pump thread.
func dialCPump(cfg ClientConfig) (*cPump, error) {
	pc := pumpConfig{addr: cfg.Addr, identity: cfg.FrontendID, outCap: defaultOutCap,
		// A socket monitor reports a dropped connection at once (a killed
		// engine's ipc/tcp connection closes), so streams fail well before
		// the liveness timeout; liveness still covers a hung (SIGSTOPped)
		// engine.
		monitorAddr: fmt.Sprintf("inproc://sluice-monitor-%d", inprocSeq.Add(1))}
	if cfg.Curve != nil {
		pub, sec, err := curveClientKeys(cfg.Curve)
		if err != nil {
			return nil, err
		}
		pc.curveServer, pc.curvePub, pc.curveSec = cfg.Curve.ServerKey, pub, sec
	}
	pump, err := newCPump(pc)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", cfg.Addr, err)
	}
	return pump, nil
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
	frame, err := c.codec.Encode(kind, msg)
	if err == nil {
		// The pump copies the frame, so the codec's buffer is free again
		// once send returns.
		err = c.pump.send(frame, true)
	}
	c.sendMu.Unlock()
	if err != nil {
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

// Close stops the goroutines and the pump thread and closes the socket.
// Outputs and Events are closed afterwards.
func (c *EngineConn) Close() {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.stop)
		<-c.ioDone
	})
}

func (c *EngineConn) setDown(reason string) {
	if c.up.Swap(false) {
		c.newSession.Store(true)
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

// pingLoop sends a PING every PingInterval while the engine is up, on its
// own goroutine: the I/O goroutine may wait for a busy consumer of Outputs
// (a request whose per-token work is heavy), and the engine must not take
// that for a dead frontend and drop every request of it (issue 21). It
// returns when the connection closes, closing pingDone.
func (c *EngineConn) pingLoop() {
	defer close(c.pingDone)
	codec := ipc.NewCodec()
	tick := time.NewTicker(c.cfg.PingInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		case <-c.pingKick:
		}
		if !c.up.Load() || c.muted.Load() {
			continue
		}
		if frame, err := codec.Encode(ipc.KindPing, &ipc.Ping{Time: now()}); err == nil {
			_ = c.pump.send(frame, false) // a lost ping is retried at the next tick
		}
	}
}

// pingNow asks the ping goroutine for a PING at once (after READY).
func (c *EngineConn) pingNow() {
	select {
	case c.pingKick <- struct{}{}:
	default:
	}
}

// ioLoop handles what the pump thread receives and sends HELLO through it
// (pings have their own goroutine, pingLoop). It never makes a cgo call while connected: it waits in a
// select on the pump's notify pipe (in Go's network poller) and a
// housekeeping timer, and reads the pump's slots from memory.
func (c *EngineConn) ioLoop() {
	defer close(c.ioDone)
	defer close(c.events)
	defer close(c.outputs)
	defer c.pump.close()
	timer := time.NewTimer(housekeepingMax)
	defer timer.Stop()
	codec := ipc.NewCodec()
	hello := &ipc.Hello{ProtocolVersion: ipc.ProtocolVersion, FrontendID: c.cfg.FrontendID, PID: os.Getpid(), ModelName: c.cfg.ModelName, Session: c.session}
	var lastHello, lastSeen time.Time
	sendDirect := func(kind ipc.Kind, msg any) {
		frame, err := codec.Encode(kind, msg)
		if err == nil {
			_ = c.pump.send(frame, false) // dropped while unconnected: retried later
		}
	}
	rejected := ""
	pump := c.pump
	defer func() { <-c.pingDone }() // before the pump closes: pingLoop sends through it
	var lastWake time.Time
	for {
		t := time.Now()
		// The loop wakes at least every housekeepingMax: a longer gap means
		// this process was frozen (SIGSTOP, swapped out), not that the
		// engine was silent; the engine's frames may still wait in the
		// pump. Give the engine a fresh liveness period rather than fail
		// every stream (the engine parks a frozen frontend meanwhile).
		lastSeen = seenAfterWake(lastSeen, lastWake, t, c.cfg.LivenessTimeout)
		lastWake = t
		if !c.up.Load() && t.Sub(lastHello) >= 200*time.Millisecond {
			lastHello = t
			if c.newSession.Swap(false) {
				if id, err := randomSession(); err == nil {
					hello.Session = id
				} else {
					hello.Session = "" // the engine then aborts the old requests too
				}
			}
			sendDirect(ipc.KindHello, hello)
		}
		if c.up.Load() {
			if t.Sub(lastSeen) > c.cfg.LivenessTimeout {
				c.setDown(fmt.Sprintf("engine silent for %s", c.cfg.LivenessTimeout))
			}
		}
		for {
			ev, view, ok := pump.next()
			if !ok {
				break
			}
			switch ev.kind {
			case pumpDisconnected:
				pump.release()
				c.setDown("engine connection lost")
				lastHello = time.Time{}
				continue
			case pumpSendFailed:
				pump.release()
				if c.up.Load() {
					c.setDown("send failed: " + ev.err.Error())
				}
				continue
			}
			lastSeen = time.Now()
			if len(view) > 0 && ipc.Kind(view[0]) == ipc.KindOutputs {
				// The batch decoder copies everything it keeps (strings,
				// ids, logprobs), so it reads the pump's memory directly.
				var b *ipc.Outputs
				select {
				case b = <-c.free:
				default:
					b = &ipc.Outputs{}
				}
				err := codec.DecodeInto(view, b)
				pump.release()
				if err != nil {
					c.log.Warn("bad frame from engine", zap.Error(err))
					continue
				}
				select {
				case c.outputs <- b:
				case <-c.stop: // Close must not wait for a consumer that stopped reading
					return
				}
				// Time spent waiting for a busy consumer is not engine
				// silence (the engine's frames wait in the pump meanwhile).
				lastSeen = time.Now()
				continue
			}
			frame := bytes.Clone(view) // cold messages: the general decoder may keep views
			pump.release()
			kind, msg, err := codec.Decode(frame)
			if err != nil {
				c.log.Warn("bad frame from engine", zap.Error(err))
				continue
			}
			switch kind {
			case ipc.KindOutputs:
				select {
				case c.outputs <- msg.(*ipc.Outputs):
				case <-c.stop:
					return
				}
			case ipc.KindPing:
				if !c.muted.Load() {
					sendDirect(ipc.KindPong, msg)
				}
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
				c.pingNow()
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
		// Sleep until the next HELLO retry, ping or liveness deadline.
		next := time.Now().Add(housekeepingMax)
		if !c.up.Load() {
			next = minTime(next, lastHello.Add(200*time.Millisecond))
		} else {
			next = minTime(next, lastSeen.Add(c.cfg.LivenessTimeout+time.Millisecond))
		}
		timer.Reset(time.Until(next))
		select {
		case <-pump.wake():
		case <-timer.C:
		case <-c.stop:
			return
		}
	}
}

// housekeepingMax bounds how long the I/O goroutine sleeps without traffic;
// it wakes earlier for the next HELLO retry, ping or liveness deadline.
const housekeepingMax = time.Second

// seenAfterWake is the I/O loop's lastSeen at a wake-up at now, the
// previous one at lastWake, forgiving the time the loop itself was late:
// the loop wakes at least every housekeepingMax, so a longer gap means this
// process did not run (frozen, swapped out, or a one-thread process starved
// on a loaded host), and the engine's frames of that time may still wait
// unread. A gap past the liveness timeout gives the engine a fresh period
// (lastSeen = now); a shorter one moves lastSeen on by the lateness (at most
// to now), so a starved frontend does not call a live engine down.
func seenAfterWake(lastSeen, lastWake, now time.Time, liveness time.Duration) time.Time {
	if lastWake.IsZero() {
		return lastSeen
	}
	gap := now.Sub(lastWake)
	late := gap - housekeepingMax
	if late <= 100*time.Millisecond {
		return lastSeen
	}
	if gap > liveness {
		return now
	}
	if s := lastSeen.Add(late); s.Before(now) {
		return s
	}
	return now
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
