package ipc

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Hand-written codecs for the types on the per-step path. Each struct is a
// positional array; decoders read as many fields as the array holds (older
// peers send fewer) and skip any extra trailing fields (newer peers).

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

func encodeFloat32s(e *msgpack.Encoder, v []float32) error {
	if err := e.EncodeArrayLen(len(v)); err != nil {
		return err
	}
	for _, x := range v {
		if err := e.EncodeFloat32(x); err != nil {
			return err
		}
	}
	return nil
}

func decodeFloat32s(d *msgpack.Decoder, dst []float32, what string) ([]float32, error) {
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
		dst = make([]float32, n)
	}
	dst = dst[:n]
	for i := range dst {
		if dst[i], err = d.DecodeFloat32(); err != nil {
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

// EncodeMsgpack writes t as [Logprob, Rank, TopIDs, TopLogprobs].
func (t *TokenLogprobs) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(tokenLogprobsFields); err != nil {
		return err
	}
	if err := e.EncodeFloat32(t.Logprob); err != nil {
		return err
	}
	if err := e.EncodeInt(int64(t.Rank)); err != nil {
		return err
	}
	if err := encodeInt32s(e, t.TopIDs); err != nil {
		return err
	}
	return encodeFloat32s(e, t.TopLogprobs)
}

// DecodeMsgpack reads what EncodeMsgpack wrote (or a shorter array).
func (t *TokenLogprobs) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := arrayHeader(d, "TokenLogprobs")
	if err != nil {
		return err
	}
	*t = TokenLogprobs{TopIDs: t.TopIDs[:0], TopLogprobs: t.TopLogprobs[:0]}
	for i := 0; i < n && i < tokenLogprobsFields; i++ {
		switch i {
		case 0:
			t.Logprob, err = d.DecodeFloat32()
		case 1:
			t.Rank, err = d.DecodeInt32()
		case 2:
			t.TopIDs, err = decodeInt32s(d, t.TopIDs, "TokenLogprobs.TopIDs")
		case 3:
			t.TopLogprobs, err = decodeFloat32s(d, t.TopLogprobs, "TokenLogprobs.TopLogprobs")
		}
		if err != nil {
			return err
		}
	}
	return skipRest(d, n, tokenLogprobsFields)
}

const outputFields = 8

// EncodeMsgpack writes o as a positional array.
func (o *Output) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(outputFields); err != nil {
		return err
	}
	if err := e.EncodeString(o.RequestID); err != nil {
		return err
	}
	if err := encodeInt32s(e, o.NewTokenIDs); err != nil {
		return err
	}
	if err := e.EncodeArrayLen(len(o.Logprobs)); err != nil {
		return err
	}
	for i := range o.Logprobs {
		if err := o.Logprobs[i].EncodeMsgpack(e); err != nil {
			return err
		}
	}
	if err := e.EncodeUint(uint64(o.FinishReason)); err != nil {
		return err
	}
	if err := e.EncodeInt(int64(o.StopReason)); err != nil {
		return err
	}
	if err := e.EncodeArrayLen(len(o.Events)); err != nil {
		return err
	}
	for _, ev := range o.Events {
		if err := e.EncodeArrayLen(2); err != nil {
			return err
		}
		if err := e.EncodeUint(uint64(ev.Type)); err != nil {
			return err
		}
		if err := e.EncodeFloat64(ev.Timestamp); err != nil {
			return err
		}
	}
	if err := e.EncodeInt(int64(o.NumCachedTokens)); err != nil {
		return err
	}
	return e.EncodeString(o.Error)
}

// DecodeMsgpack reads what EncodeMsgpack wrote (or a shorter array).
func (o *Output) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := arrayHeader(d, "Output")
	if err != nil {
		return err
	}
	*o = Output{NewTokenIDs: o.NewTokenIDs[:0], Logprobs: o.Logprobs[:0], Events: o.Events[:0], StopReason: -1}
	for i := 0; i < n && i < outputFields; i++ {
		switch i {
		case 0:
			o.RequestID, err = decodeID(d)
		case 1:
			o.NewTokenIDs, err = decodeInt32s(d, o.NewTokenIDs, "Output.NewTokenIDs")
		case 2:
			var m int
			if m, err = arrayHeader(d, "Output.Logprobs"); err != nil {
				return err
			}
			if m > 0 {
				if cap(o.Logprobs) < m {
					o.Logprobs = make([]TokenLogprobs, m)
				}
				o.Logprobs = o.Logprobs[:m]
				for j := range o.Logprobs {
					if err = o.Logprobs[j].DecodeMsgpack(d); err != nil {
						return err
					}
				}
			}
		case 3:
			var f uint8
			f, err = d.DecodeUint8()
			o.FinishReason = FinishReason(f)
		case 4:
			o.StopReason, err = d.DecodeInt32()
		case 5:
			var m int
			if m, err = arrayHeader(d, "Output.Events"); err != nil {
				return err
			}
			for j := 0; j < m; j++ {
				var k int
				if k, err = arrayHeader(d, "Event"); err != nil {
					return err
				}
				var ev Event
				for f := 0; f < k; f++ {
					switch f {
					case 0:
						var t uint8
						t, err = d.DecodeUint8()
						ev.Type = EventType(t)
					case 1:
						ev.Timestamp, err = d.DecodeFloat64()
					default:
						err = d.Skip()
					}
					if err != nil {
						return err
					}
				}
				o.Events = append(o.Events, ev)
			}
		case 6:
			o.NumCachedTokens, err = d.DecodeInt32()
		case 7:
			o.Error, err = d.DecodeString()
		}
		if err != nil {
			return fmt.Errorf("Output field %d: %w", i, err)
		}
	}
	return skipRest(d, n, outputFields)
}

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

// EncodeMsgpack writes s as a positional array.
func (s *SchedulerStats) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(statsFields); err != nil {
		return err
	}
	for _, v := range [...]int64{int64(s.Running), int64(s.Waiting)} {
		if err := e.EncodeInt(v); err != nil {
			return err
		}
	}
	if err := e.EncodeFloat32(s.KVUsage); err != nil {
		return err
	}
	for _, v := range [...]int64{int64(s.NumKVBlocks), s.PrefixQueries, s.PrefixHits, s.Preemptions, int64(s.StepCount),
		s.GeneratedTokens, s.PromptTokens, s.StepTimeMicros, s.FinishedRequests, int64(s.RunningByFrontend)} {
		if err := e.EncodeInt(v); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack reads what EncodeMsgpack wrote (or a shorter array).
func (s *SchedulerStats) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := arrayHeader(d, "SchedulerStats")
	if err != nil {
		return err
	}
	*s = SchedulerStats{}
	for i := 0; i < n && i < statsFields; i++ {
		if i == 2 {
			if s.KVUsage, err = d.DecodeFloat32(); err != nil {
				return err
			}
			continue
		}
		v, err := d.DecodeInt64()
		if err != nil {
			return fmt.Errorf("SchedulerStats field %d: %w", i, err)
		}
		s.setInt(i, v)
	}
	return skipRest(d, n, statsFields)
}

const outputsFields = 5

// EncodeMsgpack writes o as [EngineID, Step, Timestamp, Outputs, Stats|nil].
func (o *Outputs) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(outputsFields); err != nil {
		return err
	}
	if err := e.EncodeString(o.EngineID); err != nil {
		return err
	}
	if err := e.EncodeUint(o.Step); err != nil {
		return err
	}
	if err := e.EncodeFloat64(o.Timestamp); err != nil {
		return err
	}
	if err := e.EncodeArrayLen(len(o.Outputs)); err != nil {
		return err
	}
	for i := range o.Outputs {
		if err := o.Outputs[i].EncodeMsgpack(e); err != nil {
			return err
		}
	}
	if o.Stats == nil {
		return e.EncodeNil()
	}
	return o.Stats.EncodeMsgpack(e)
}

// DecodeMsgpack reads what EncodeMsgpack wrote (or a shorter array). It
// reuses o's slices, so decoding into the same Outputs every step allocates
// only the request-id strings.
func (o *Outputs) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := arrayHeader(d, "Outputs")
	if err != nil {
		return err
	}
	outs, stats := o.Outputs[:0], o.Stats
	*o = Outputs{}
	for i := 0; i < n && i < outputsFields; i++ {
		switch i {
		case 0:
			o.EngineID, err = d.DecodeString()
		case 1:
			o.Step, err = d.DecodeUint64()
		case 2:
			o.Timestamp, err = d.DecodeFloat64()
		case 3:
			var m int
			if m, err = arrayHeader(d, "Outputs.Outputs"); err != nil {
				return err
			}
			if m > 0 {
				if cap(outs) < m {
					grown := make([]Output, m)
					copy(grown, outs[:cap(outs)])
					outs = grown
				}
				outs = outs[:m]
				for j := range outs {
					if err = outs[j].DecodeMsgpack(d); err != nil {
						return err
					}
				}
			}
			o.Outputs = outs
		case 4:
			var null bool
			if null, err = isNil(d); err != nil || null {
				break
			}
			if stats == nil {
				stats = &SchedulerStats{}
			}
			if err = stats.DecodeMsgpack(d); err == nil {
				o.Stats = stats
			}
		}
		if err != nil {
			return fmt.Errorf("Outputs field %d: %w", i, err)
		}
	}
	return skipRest(d, n, outputsFields)
}
