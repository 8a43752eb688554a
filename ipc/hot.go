package ipc

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Helpers for the hand-written vmihailenco/msgpack codecs of AddRequest and
// SamplingParams (hot_add.go) and the cold messages (codec.go). Each struct
// is a positional array; decoders read as many fields as the array holds
// (older peers send fewer) and skip any extra trailing fields (newer peers).
// The per-step types (Outputs, Output, TokenLogprobs, SchedulerStats) have
// one codec, in hot_fast.go.

// errTooLong is returned when a length prefix exceeds what the rest of the
// frame could possibly hold.
func checkLen(d *msgpack.Decoder, n int, what string) error {
	if n < -1 {
		return fmt.Errorf("%s: negative length %d", what, n)
	}
	// Small lengths cannot cause a large allocation; only check the rest.
	if n <= 64 {
		return nil
	}
	if rd, ok := d.Buffered().(interface{ Len() int }); ok && n > rd.Len() {
		return fmt.Errorf("%s: length %d exceeds remaining %d bytes", what, n, rd.Len())
	}
	return nil
}

func encodeInt32s(e *msgpack.Encoder, v []int32) error {
	if err := e.EncodeArrayLen(len(v)); err != nil {
		return err
	}
	for _, x := range v {
		if err := e.EncodeInt(int64(x)); err != nil {
			return err
		}
	}
	return nil
}

func decodeInt32s(d *msgpack.Decoder, dst []int32, what string) ([]int32, error) {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if err := checkLen(d, n, what); err != nil {
		return nil, err
	}
	if n <= 0 {
		return dst[:0], nil
	}
	if cap(dst) < n {
		dst = make([]int32, n)
	}
	dst = dst[:n]
	for i := range dst {
		if dst[i], err = d.DecodeInt32(); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// arrayHeader reads an array header and checks it against the frame size.
func arrayHeader(d *msgpack.Decoder, what string) (int, error) {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if err := checkLen(d, n, what); err != nil {
		return 0, err
	}
	return n, nil
}

// skipRest skips fields beyond those this version knows.
func skipRest(d *msgpack.Decoder, n, known int) error {
	for i := known; i < n; i++ {
		if err := d.Skip(); err != nil {
			return err
		}
	}
	return nil
}

// isNil consumes a nil if one is next.
func isNil(d *msgpack.Decoder) (bool, error) {
	c, err := d.PeekCode()
	if err != nil {
		return false, err
	}
	if c == msgpcode.Nil {
		return true, d.DecodeNil()
	}
	return false, nil
}

const tokenLogprobsFields = 4
const outputFields = 8
const outputsFields = 5

const statsFields = 13

// setInt stores field i (any but 2, KVUsage) of the positional encoding.
func (s *SchedulerStats) setInt(i int, v int64) {
	switch i {
	case 0:
		s.Running = int32(v)
	case 1:
		s.Waiting = int32(v)
	case 3:
		s.NumKVBlocks = int32(v)
	case 4:
		s.PrefixQueries = v
	case 5:
		s.PrefixHits = v
	case 6:
		s.Preemptions = v
	case 7:
		s.StepCount = uint64(v)
	case 8:
		s.GeneratedTokens = v
	case 9:
		s.PromptTokens = v
	case 10:
		s.StepTimeMicros = v
	case 11:
		s.FinishedRequests = v
	case 12:
		s.RunningByFrontend = int32(v)
	}
}

// EncodeMsgpack lets vmihailenco/msgpack (msgpack.Marshal of a utility
// result) write s with its one codec, appendMsg.
func (s *SchedulerStats) EncodeMsgpack(e *msgpack.Encoder) error {
	return e.Encode(msgpack.RawMessage(s.appendMsg(nil)))
}

// DecodeMsgpack reads s with its one codec, readMsg.
func (s *SchedulerStats) DecodeMsgpack(d *msgpack.Decoder) error {
	raw, err := d.DecodeRaw()
	if err != nil {
		return err
	}
	_, err = s.readMsg(raw)
	return err
}

// EncodeMsgpack lets vmihailenco/msgpack write o with its one codec,
// AppendMsg (Codec uses AppendMsg directly).
func (o *Outputs) EncodeMsgpack(e *msgpack.Encoder) error {
	return e.Encode(msgpack.RawMessage(o.AppendMsg(nil)))
}

// DecodeMsgpack reads o with its one codec, readMsg.
func (o *Outputs) DecodeMsgpack(d *msgpack.Decoder) error {
	raw, err := d.DecodeRaw()
	if err != nil {
		return err
	}
	_, err = o.readMsg(raw, nil)
	return err
}
