package ipc

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrShortFrame is returned for a frame with no kind byte.
var ErrShortFrame = errors.New("ipc: empty frame")

// Codec encodes and decodes frames. It reuses its buffers, so a Codec is not
// safe for concurrent use: give each goroutine that owns a socket its own.
type Codec struct {
	out []byte // the per-step fast path's buffer
	buf bytes.Buffer
	enc *msgpack.Encoder
	rd  bytes.Reader
	dec *msgpack.Decoder
	// intern maps request ids to one string each: a live request's id
	// recurs in every step's batch, so decoding it as a lookup instead of
	// a new string removes one allocation per output per step. A
	// request's id leaves with its last output (a finish reason), so the
	// table holds the live requests.
	intern map[string]string
}

// maxInterned bounds the intern table; it is cleared when full (ids whose
// last output never came go with it).
const maxInterned = 1 << 16

// NewCodec returns a codec with empty buffers.
func NewCodec() *Codec {
	c := &Codec{intern: make(map[string]string)}
	c.enc = msgpack.NewEncoder(&c.buf)
	c.enc.UseCompactInts(true)
	c.dec = msgpack.NewDecoder(&c.rd)
	return c
}

// Encode returns the frame [kind][msgpack(msg)]. The returned slice is valid
// until the next call to Encode.
func (c *Codec) Encode(kind Kind, msg any) ([]byte, error) {
	c.buf.Reset()
	c.buf.WriteByte(byte(kind))
	var err error
	switch m := msg.(type) {
	case *Outputs:
		c.out = m.AppendMsg(append(c.out[:0], byte(kind)))
		return c.out, nil
	case *AddRequest:
		err = m.EncodeMsgpack(c.enc)
	case nil:
		err = c.enc.EncodeNil()
	default:
		err = c.enc.Encode(msg)
	}
	if err != nil {
		return nil, fmt.Errorf("ipc: encode %s: %w", kind, err)
	}
	return c.buf.Bytes(), nil
}

// NewMessage returns a new zero value of the body type that frames of kind
// carry, or nil for an unknown kind.
func NewMessage(kind Kind) any {
	switch kind {
	case KindHello:
		return &Hello{}
	case KindReady:
		return &Ready{}
	case KindAdd:
		return &AddRequest{}
	case KindAbort:
		return &Abort{}
	case KindOutputs:
		return &Outputs{}
	case KindUtility:
		return &Utility{}
	case KindUtilityResult:
		return &UtilityResult{}
	case KindPing, KindPong:
		return &Ping{}
	case KindShutdown:
		return &Shutdown{}
	case KindReject:
		return &Reject{}
	}
	return nil
}

// Decode parses a frame into its kind and a freshly allocated body (a pointer
// to one of this package's message types). Hostile bytes give an error,
// never a panic or an allocation larger than the frame warrants.
func (c *Codec) Decode(frame []byte) (kind Kind, msg any, err error) {
	if len(frame) == 0 {
		return 0, nil, ErrShortFrame
	}
	kind = Kind(frame[0])
	msg = NewMessage(kind)
	if msg == nil {
		return kind, nil, fmt.Errorf("ipc: unknown frame kind %d", frame[0])
	}
	if err := c.DecodeInto(frame, msg); err != nil {
		return kind, nil, err
	}
	return kind, msg, nil
}

// DecodeInto parses frame's body into msg, which must be the body type of
// the frame's kind. Reusing msg (for example an *Outputs) avoids allocation.
func (c *Codec) DecodeInto(frame []byte, msg any) (err error) {
	if len(frame) == 0 {
		return ErrShortFrame
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ipc: decode %s: malformed frame: %v", Kind(frame[0]), r)
		}
	}()
	if m, ok := msg.(*Outputs); ok {
		rest, err := m.readMsg(frame[1:], c.intern)
		if err != nil {
			return fmt.Errorf("ipc: decode %s: %w", Kind(frame[0]), err)
		}
		_ = rest // trailing bytes after the body are ignored
		return nil
	}
	c.rd.Reset(frame[1:])
	c.dec.Reset(&c.rd)
	switch m := msg.(type) {
	case *AddRequest:
		err = m.DecodeMsgpack(c.dec)
	default:
		err = decodeTolerant(c.dec, msg)
	}
	if err != nil {
		return fmt.Errorf("ipc: decode %s: %w", Kind(frame[0]), err)
	}
	return nil
}

// decodeTolerant decodes a positional array into the exported fields of the
// struct msg points to, in order. Unlike the library's as_array decoding, it
// accepts a shorter array (missing fields stay zero) and skips extra trailing
// fields, which is what lets the protocol grow at the end. Used for the cold
// control messages; the hot types have hand-written decoders.
func decodeTolerant(d *msgpack.Decoder, msg any) error {
	v := reflect.ValueOf(msg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return d.Decode(msg)
	}
	v = v.Elem()
	n, err := arrayHeader(d, v.Type().Name())
	if err != nil {
		return err
	}
	i := 0
	for f := 0; f < v.NumField() && i < n; f++ {
		if !v.Type().Field(f).IsExported() {
			continue
		}
		if err := d.DecodeValue(v.Field(f)); err != nil {
			return fmt.Errorf("%s.%s: %w", v.Type().Name(), v.Type().Field(f).Name, err)
		}
		i++
	}
	return skipRest(d, n, i)
}
