package zmqtransport

import (
	"errors"
	"fmt"
	"sync"
	"time"

	zmq "github.com/pebbe/zmq4"
	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/ipc"
)

// EngineConfig configures the engine's ROUTER socket.
type EngineConfig struct {
	// Addr is the endpoint to bind: ipc:///path or tcp://host:port.
	Addr string
	// Ready is sent in answer to every accepted HELLO.
	Ready ipc.Ready
	// Log receives connection events; nil means no logging.
	Log *zap.Logger
	// PingInterval and LivenessTimeout (how long a frontend may be silent)
	// default to 1 s and 2.5 s.
	PingInterval    time.Duration
	LivenessTimeout time.Duration
	// InboundBuffer is the capacity of the Inbound channel (default 4096).
	InboundBuffer int
	// Curve, when set, encrypts (and optionally authenticates) tcp://
	// connections with CURVE.
	Curve *CurveServer
	// ParkGrace is how long a frontend silent past LivenessTimeout keeps
	// its requests (default DefaultParkGrace): they go on running, their
	// outputs are held, and any frame from the frontend (or a HELLO with its
	// session) delivers the held outputs in order. After ParkGrace the
	// frontend is dropped (KindFrontendGone) and its requests are freed.
	ParkGrace time.Duration
	// ParkBufferBytes bounds the encoded outputs held for one parked
	// frontend (default DefaultParkBufferBytes); past it the frontend is
	// dropped at once.
	ParkBufferBytes int
}

// Defaults of EngineConfig's parking limits.
const (
	DefaultParkGrace       = 30 * time.Second
	DefaultParkBufferBytes = 64 << 20
)

// Inbound is a message from a frontend, decoded by the input goroutine.
type Inbound struct {
	Frontend string
	// Kind is ipc.KindAdd, ipc.KindAbort, ipc.KindUtility, or
	// KindFrontendGone when the frontend went silent or restarted.
	Kind    ipc.Kind
	Add     *ipc.AddRequest
	Abort   *ipc.Abort
	Utility *ipc.Utility
}

type outFrame struct {
	to   string // frontend id; "" with kind KindShutdown broadcasts
	kind ipc.Kind
	msg  any
	stop bool
}

type frontendState struct {
	pid      int
	session  string
	lastSeen time.Time
	// parked is set while the frontend is silent past the liveness
	// timeout but within ParkGrace: outputs for it wait in held.
	parked    bool
	parkedAt  time.Time
	held      [][]byte
	heldBytes int
}

// EngineSocket is the engine's end: one ROUTER that every frontend's DEALER
// connects to.
type EngineSocket struct {
	cfg    EngineConfig
	log    *zap.Logger
	ctx    *zmq.Context
	router *zmq.Socket
	push   *zmq.Socket
	pull   *zmq.Socket
	in     chan Inbound
	out    chan outFrame

	mu        sync.Mutex
	frontends map[string]*frontendState // owned by the I/O goroutine; mu for Frontends()
	closeOnce sync.Once
	stopping  chan struct{}
	ioDone    chan struct{}
	outDone   chan struct{}
}

// Listen binds the ROUTER and starts the I/O and output goroutines.
func Listen(cfg EngineConfig) (*EngineSocket, error) {
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.LivenessTimeout <= 0 {
		cfg.LivenessTimeout = DefaultFrontendLivenessTimeout
	}
	if cfg.InboundBuffer <= 0 {
		cfg.InboundBuffer = 4096
	}
	if cfg.ParkGrace <= 0 {
		cfg.ParkGrace = DefaultParkGrace
	}
	if cfg.ParkBufferBytes <= 0 {
		cfg.ParkBufferBytes = DefaultParkBufferBytes
	}
	cfg.Ready.ProtocolVersion = ipc.ProtocolVersion
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	ctx, err := zmq.NewContext()
	if err != nil {
		return nil, fmt.Errorf("zmq context: %w", err)
	}
	s := &EngineSocket{cfg: cfg, log: log, ctx: ctx, in: make(chan Inbound, cfg.InboundBuffer),
		out: make(chan outFrame, 4096), frontends: map[string]*frontendState{},
		ioDone: make(chan struct{}), outDone: make(chan struct{}), stopping: make(chan struct{})}
	fail := func(err error) (*EngineSocket, error) {
		for _, sock := range []*zmq.Socket{s.router, s.push, s.pull} {
			if sock != nil {
				sock.Close()
			}
		}
		ctx.Term()
		return nil, err
	}
	if s.router, err = ctx.NewSocket(zmq.ROUTER); err != nil {
		return fail(fmt.Errorf("router socket: %w", err))
	}
	s.router.SetRouterMandatory(1)
	s.router.SetSndhwm(0)
	s.router.SetRcvhwm(0)
	s.router.SetLinger(200 * time.Millisecond)
	if cfg.Curve != nil {
		if err := applyCurveServer(ctx, s.router, cfg.Curve, log, s.stopping); err != nil {
			return fail(err)
		}
	}
	if err := prepareIPC(cfg.Addr); err != nil {
		return fail(err)
	}
	if err := s.router.Bind(cfg.Addr); err != nil {
		return fail(fmt.Errorf("bind %s: %w", cfg.Addr, err))
	}
	if err := secureIPC(cfg.Addr); err != nil {
		return fail(err)
	}
	if s.push, s.pull, err = newPair(ctx, "engine"); err != nil {
		return fail(fmt.Errorf("inproc pair: %w", err))
	}
	go s.outputLoop()
	go s.ioLoop()
	log.Info("engine socket bound", zap.String("addr", cfg.Addr))
	return s, nil
}

// Inbound delivers decoded frontend messages. It is closed after Close.
func (s *EngineSocket) Inbound() <-chan Inbound { return s.in }

// SendOutputs queues one step's batch for a frontend. The output goroutine
// encodes and sends it; the caller must not modify o afterwards.
func (s *EngineSocket) SendOutputs(frontend string, o *ipc.Outputs) {
	s.send(outFrame{to: frontend, kind: ipc.KindOutputs, msg: o})
}

func (s *EngineSocket) send(f outFrame) {
	select {
	case <-s.stopping:
	default:
		s.out <- f
	}
}

// SendUtilityResult answers a utility call.
func (s *EngineSocket) SendUtilityResult(frontend string, r *ipc.UtilityResult) {
	s.send(outFrame{to: frontend, kind: ipc.KindUtilityResult, msg: r})
}

// Frontends lists the frontends currently connected.
func (s *EngineSocket) Frontends() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.frontends))
	for id := range s.frontends {
		ids = append(ids, id)
	}
	return ids
}

// Close tells every frontend the engine is stopping (SHUTDOWN), after any
// outputs already queued, then closes the sockets. Safe to call twice.
func (s *EngineSocket) Close(reason string) {
	s.closeOnce.Do(func() {
		close(s.stopping)
		s.out <- outFrame{kind: ipc.KindShutdown, msg: &ipc.Shutdown{Reason: reason}}
		s.out <- outFrame{stop: true}
		<-s.outDone
		<-s.ioDone
		s.push.Close()
		s.router.Close()
		s.ctx.Term()
		removeIPC(s.cfg.Addr)
	})
}

// outputLoop encodes frames and pushes them to the I/O goroutine.
func (s *EngineSocket) outputLoop() {
	defer close(s.outDone)
	codec := ipc.NewCodec()
	for f := range s.out {
		if f.stop {
			s.push.SendMessage("", "stop")
			return
		}
		frame, err := codec.Encode(f.kind, f.msg)
		if err != nil {
			s.log.Error("encode", zap.Error(err))
			continue
		}
		if _, err := s.push.SendBytes([]byte(f.to), zmq.SNDMORE); err != nil {
			s.log.Error("inproc send", zap.Error(err))
			continue
		}
		if _, err := s.push.SendBytes(frame, 0); err != nil {
			s.log.Error("inproc send", zap.Error(err))
		}
	}
}

// ioLoop owns the ROUTER: it receives and decodes frontend frames, forwards
// encoded frames from the output goroutine, and runs liveness. Like the
// frontend's, it waits in a select on its sockets' ZMQ_FDs (sockWaiter) and
// a ticker, never in a cgo zmq_poll.
func (s *EngineSocket) ioLoop() {
	defer close(s.ioDone)
	defer close(s.in)
	defer s.pull.Close()
	// The router is closed by Close after ioDone; both waiters let go of
	// their descriptors before that.
	routerW := s.waiter(s.router, "router")
	defer routerW.close()
	pullW := s.waiter(s.pull, "inproc pull")
	defer pullW.close()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	codec := ipc.NewCodec()
	lastPing := time.Now()
	pingFrame := []byte{}
	var err error
	for {
		// Drain until a whole pass finds nothing (see sockWaiter): sends on
		// the router may consume its ZMQ_FD edge.
		for busy := true; busy; {
			busy = false
			if readable(s.router) {
				busy = true
				s.drainRouter(codec)
			}
			if readable(s.pull) {
				busy = true
				if stop := s.drainPull(codec); stop {
					return
				}
			}
		}
		t := time.Now()
		ping := t.Sub(lastPing) >= s.cfg.PingInterval
		if ping {
			lastPing = t
			if pingFrame, err = codec.Encode(ipc.KindPing, &ipc.Ping{Time: now()}); err == nil {
				pingFrame = append([]byte(nil), pingFrame...)
			}
		}
		// Liveness is checked every wake-up (≤ 100 ms), not only when pinging,
		// so a dead frontend is dropped within the timeout of its last frame.
		// A silent frontend is parked first (its requests run on, their
		// outputs are held) and dropped only after ParkGrace, so a frontend
		// that was merely frozen for a while loses nothing. Parked
		// frontends are still pinged, so they keep seeing a live engine.
		// A frontend whose connection is gone (a killed process: the
		// ROUTER no longer knows its identity) is dropped at once instead.
		var gone []string
		s.mu.Lock()
		for id, st := range s.frontends {
			if st.parked && t.Sub(st.parkedAt) > s.cfg.ParkGrace {
				gone = append(gone, id)
				continue
			}
			park := !st.parked && t.Sub(st.lastSeen) > s.cfg.LivenessTimeout
			if ping || park {
				if park && !ping {
					if f, err := codec.Encode(ipc.KindPing, &ipc.Ping{Time: now()}); err == nil {
						pingFrame = append(pingFrame[:0:0], f...)
					}
				}
				if err := s.sendRaw(id, pingFrame); err != nil && (park || st.parked) {
					gone = append(gone, id) // disconnected: nothing to wait for
					continue
				}
			}
			if park {
				st.parked, st.parkedAt = true, t
				s.log.Warn("frontend silent, parking its requests", zap.String("frontend", id),
					zap.Duration("timeout", s.cfg.LivenessTimeout), zap.Duration("grace", s.cfg.ParkGrace))
			}
		}
		for _, id := range gone {
			delete(s.frontends, id)
		}
		s.mu.Unlock()
		for _, id := range gone {
			s.log.Warn("frontend gone (disconnected, or silent past the grace period), dropping its requests", zap.String("frontend", id), zap.Duration("grace", s.cfg.ParkGrace))
			s.deliver(Inbound{Frontend: id, Kind: KindFrontendGone})
		}
		if ping {
			continue // the pings were router calls: drain again before waiting
		}
		select {
		case <-routerW.C:
		case <-pullW.C:
		case <-tick.C:
		}
	}
}

// waiter starts a sockWaiter for one of the I/O goroutine's sockets.
func (s *EngineSocket) waiter(sock *zmq.Socket, name string) *sockWaiter {
	w, err := newSockWaiter(sock)
	if err != nil {
		s.log.Warn("zmq socket wait falls back to polling every "+fallbackTick.String(), zap.String("socket", name), zap.Error(err))
	}
	return w
}

// sendRaw sends a frame to a frontend; the error says the peer is unknown
// or disconnected (ROUTER_MANDATORY), and the frame is dropped.
func (s *EngineSocket) sendRaw(to string, frame []byte) error {
	if _, err := s.router.SendBytes([]byte(to), zmq.SNDMORE|zmq.DONTWAIT); err != nil {
		return fmt.Errorf("send to %s: %w", to, err)
	}
	if _, err := s.router.SendBytes(frame, zmq.DONTWAIT); err != nil {
		s.log.Debug("router send", zap.String("to", to), zap.Error(err))
	}
	return nil
}

func (s *EngineSocket) sendMsg(codec *ipc.Codec, to string, kind ipc.Kind, msg any) {
	frame, err := codec.Encode(kind, msg)
	if err != nil {
		s.log.Error("encode", zap.Stringer("kind", kind), zap.Error(err))
		return
	}
	_ = s.sendRaw(to, frame)
}

// drainPull forwards queued output frames; reports whether Close asked to stop.
func (s *EngineSocket) drainPull(codec *ipc.Codec) bool {
	for {
		parts, err := s.pull.RecvMessageBytes(zmq.DONTWAIT)
		if err != nil {
			return false
		}
		if len(parts) != 2 {
			continue
		}
		to := string(parts[0])
		switch {
		case to == "" && string(parts[1]) == "stop":
			return true
		case to == "":
			s.mu.Lock()
			for id := range s.frontends {
				s.sendRaw(id, parts[1])
			}
			s.mu.Unlock()
		default:
			s.forward(to, parts[1])
		}
	}
}

// forward sends an encoded frame to a frontend, or holds it while the
// frontend is parked; a parked frontend whose held frames pass
// ParkBufferBytes is dropped (its requests freed).
func (s *EngineSocket) forward(to string, frame []byte) {
	s.mu.Lock()
	st, ok := s.frontends[to]
	if !ok || !st.parked {
		s.mu.Unlock()
		s.sendRaw(to, frame)
		return
	}
	st.held = append(st.held, frame)
	st.heldBytes += len(frame)
	over := st.heldBytes > s.cfg.ParkBufferBytes
	if over {
		delete(s.frontends, to)
	}
	s.mu.Unlock()
	if over {
		s.log.Warn("parked frontend's held outputs over the limit, dropping its requests", zap.String("frontend", to), zap.Int("limit_bytes", s.cfg.ParkBufferBytes))
		s.deliver(Inbound{Frontend: to, Kind: KindFrontendGone})
	}
}

// unpark delivers a parked frontend's held frames, in order, and makes it
// live again. Called with s.mu held, from the I/O goroutine.
func (s *EngineSocket) unpark(id string, st *frontendState) {
	if !st.parked {
		return
	}
	s.log.Info("parked frontend is back; resuming its requests", zap.String("frontend", id), zap.Int("held_frames", len(st.held)), zap.Int("held_bytes", st.heldBytes))
	for _, f := range st.held {
		s.sendRaw(id, f)
	}
	st.parked, st.held, st.heldBytes = false, nil, 0
}

func (s *EngineSocket) drainRouter(codec *ipc.Codec) {
	for {
		parts, err := s.router.RecvMessageBytes(zmq.DONTWAIT)
		if err != nil {
			return
		}
		if len(parts) != 2 {
			s.log.Warn("dropping malformed message", zap.Int("parts", len(parts)))
			continue
		}
		s.handle(codec, string(parts[0]), parts[1])
	}
}

func (s *EngineSocket) handle(codec *ipc.Codec, from string, frame []byte) {
	kind, msg, err := codec.Decode(frame)
	if err != nil {
		// A rogue or broken peer: drop it and whatever it had running.
		s.log.Warn("bad frame from frontend; dropping the peer", zap.String("frontend", from), zap.Error(err))
		s.mu.Lock()
		_, known := s.frontends[from]
		delete(s.frontends, from)
		s.mu.Unlock()
		if known {
			s.deliver(Inbound{Frontend: from, Kind: KindFrontendGone})
		}
		s.sendMsg(codec, from, ipc.KindReject, &ipc.Reject{Reason: "malformed frame: " + err.Error()})
		return
	}
	t := time.Now()
	if kind == ipc.KindHello {
		h := msg.(*ipc.Hello)
		if h.ProtocolVersion != ipc.ProtocolVersion {
			s.sendMsg(codec, from, ipc.KindReject, &ipc.Reject{Reason: fmt.Sprintf("protocol version %d, engine speaks %d", h.ProtocolVersion, ipc.ProtocolVersion)})
			return
		}
		if h.ModelName != "" && h.ModelName != s.cfg.Ready.ModelName {
			s.sendMsg(codec, from, ipc.KindReject, &ipc.Reject{Reason: fmt.Sprintf("engine serves model %q, frontend expects %q", s.cfg.Ready.ModelName, h.ModelName)})
			return
		}
		s.mu.Lock()
		st, known := s.frontends[from]
		if known && h.Session != "" && h.Session == st.session {
			// The same session says HELLO again (it thought the engine was
			// gone, or its READY was lost): its requests go on, and what was
			// held for it while it was parked is delivered after READY.
			st.lastSeen = t
			ready := s.cfg.Ready
			s.sendMsg(codec, from, ipc.KindReady, &ready)
			s.unpark(from, st)
			s.mu.Unlock()
			s.log.Info("frontend resumed its session", zap.String("frontend", from))
			return
		}
		s.frontends[from] = &frontendState{pid: h.PID, session: h.Session, lastSeen: t}
		s.mu.Unlock()
		// Any other HELLO opens a new session (a restarted frontend, or one
		// without a session id): frames on one connection arrive in order,
		// so every request it sent before this HELLO is orphaned. Abort them.
		if known {
			s.deliver(Inbound{Frontend: from, Kind: KindFrontendGone})
			if st.pid != h.PID {
				s.log.Info("frontend restarted", zap.String("frontend", from), zap.Int("pid", h.PID))
			}
		} else {
			s.log.Info("frontend connected", zap.String("frontend", from), zap.Int("pid", h.PID))
		}
		ready := s.cfg.Ready
		s.sendMsg(codec, from, ipc.KindReady, &ready)
		return
	}
	s.mu.Lock()
	st, known := s.frontends[from]
	if known {
		st.lastSeen = t
		s.unpark(from, st) // any frame shows a parked frontend is back
	}
	s.mu.Unlock()
	if !known {
		// An engine restart forgot this frontend: make it say HELLO again.
		s.sendMsg(codec, from, ipc.KindReject, &ipc.Reject{Reason: ReasonUnknownSession})
		return
	}
	switch kind {
	case ipc.KindPing:
		s.sendMsg(codec, from, ipc.KindPong, msg)
	case ipc.KindPong:
	case ipc.KindAdd:
		s.deliver(Inbound{Frontend: from, Kind: kind, Add: msg.(*ipc.AddRequest)})
	case ipc.KindAbort:
		s.deliver(Inbound{Frontend: from, Kind: kind, Abort: msg.(*ipc.Abort)})
	case ipc.KindUtility:
		s.deliver(Inbound{Frontend: from, Kind: kind, Utility: msg.(*ipc.Utility)})
	default:
		s.log.Warn("unexpected frame from frontend", zap.String("frontend", from), zap.Stringer("kind", kind))
	}
}

// ReasonUnknownSession is the Reject reason an engine gives a frontend it
// has no session with (typically after the engine restarted).
const ReasonUnknownSession = "unknown session: say HELLO"

// ErrNotReady is returned by EngineConn.Send while no engine has answered
// HELLO (or after it went away).
var ErrNotReady = errors.New("engine not ready")

// deliver hands a message to the engine loop unless the socket is closing.
func (s *EngineSocket) deliver(m Inbound) {
	select {
	case s.in <- m:
	case <-s.stopping:
	}
}
