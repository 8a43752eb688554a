package engineclient

import (
	"time"

	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// zmqConn adapts a zmqtransport connection to Transport.
type zmqConn struct {
	c      *zmqtransport.EngineConn
	events chan Event
}

// FromZMQ adapts c; its events are relayed by a goroutine that ends when c's
// event channel closes.
func FromZMQ(c *zmqtransport.EngineConn) Transport {
	z := &zmqConn{c: c, events: make(chan Event, 16)}
	go func() {
		defer close(z.events)
		for ev := range c.Events() {
			z.events <- Event{Up: ev.Up, Ready: ev.Ready, Reason: ev.Reason}
		}
	}()
	return z
}

// The Transport methods delegate to the zmqtransport connection.

func (z *zmqConn) Send(kind ipc.Kind, msg any) error { return z.c.Send(kind, msg) }
func (z *zmqConn) Outputs() <-chan *ipc.Outputs      { return z.c.Outputs() }
func (z *zmqConn) Recycle(b *ipc.Outputs)            { z.c.Recycle(b) }
func (z *zmqConn) Events() <-chan Event              { return z.events }
func (z *zmqConn) Ready() (ipc.Ready, bool)          { return z.c.Ready() }
func (z *zmqConn) Close()                            { z.c.Close() }
func (z *zmqConn) Call(method string, args []byte, timeout time.Duration) (*ipc.UtilityResult, error) {
	return z.c.Call(method, args, timeout)
}
