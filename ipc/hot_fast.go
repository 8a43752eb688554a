package ipc

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// The one codec of the per-step types (Outputs, Output, TokenLogprobs,
// SchedulerStats): encoded by appending to a byte slice and decoded by
// slicing one, with tinylib/msgp's runtime primitives (what its code
// generator emits, written out by hand for these few types), without an
// io.Writer/io.Reader call per value (vmihailenco/msgpack's path cost
// ~190 µs of CPU per 1024-output batch, this one a fraction of that:
// docs/BENCHMARKS.md). Their EncodeMsgpack/DecodeMsgpack methods (hot.go)
// only adapt this codec to vmihailenco/msgpack's interfaces. The bytes are
// pinned by testdata/frames.golden.

// AppendMsg appends o's msgpack encoding to b.
func (o *Outputs) AppendMsg(b []byte) []byte {
	b = msgp.AppendArrayHeader(b, outputsFields)
	b = msgp.AppendString(b, o.EngineID)
	b = msgp.AppendUint64(b, o.Step)
	b = msgp.AppendFloat64(b, o.Timestamp)
	b = msgp.AppendArrayHeader(b, uint32(len(o.Outputs)))
	for i := range o.Outputs {
		b = o.Outputs[i].appendMsg(b)
	}
	if o.Stats == nil {
		return msgp.AppendNil(b)
	}
	return o.Stats.appendMsg(b)
}

func appendInt32s(b []byte, v []int32) []byte {
	b = msgp.AppendArrayHeader(b, uint32(len(v)))
	for _, x := range v {
		b = msgp.AppendInt64(b, int64(x))
	}
	return b
}

func (o *Output) appendMsg(b []byte) []byte {
	b = msgp.AppendArrayHeader(b, outputFields)
	b = msgp.AppendString(b, o.RequestID)
	b = appendInt32s(b, o.NewTokenIDs)
	b = msgp.AppendArrayHeader(b, uint32(len(o.Logprobs)))
	for i := range o.Logprobs {
		lp := &o.Logprobs[i]
		b = msgp.AppendArrayHeader(b, tokenLogprobsFields)
		b = msgp.AppendFloat32(b, lp.Logprob)
		b = msgp.AppendInt64(b, int64(lp.Rank))
		b = appendInt32s(b, lp.TopIDs)
		b = msgp.AppendArrayHeader(b, uint32(len(lp.TopLogprobs)))
		for _, f := range lp.TopLogprobs {
			b = msgp.AppendFloat32(b, f)
		}
	}
	b = msgp.AppendUint64(b, uint64(o.FinishReason))
	b = msgp.AppendInt64(b, int64(o.StopReason))
	b = msgp.AppendArrayHeader(b, uint32(len(o.Events)))
	for _, ev := range o.Events {
		b = msgp.AppendArrayHeader(b, 2)
		b = msgp.AppendUint64(b, uint64(ev.Type))
		b = msgp.AppendFloat64(b, ev.Timestamp)
	}
	b = msgp.AppendInt64(b, int64(o.NumCachedTokens))
	return msgp.AppendString(b, o.Error)
}

func (s *SchedulerStats) appendMsg(b []byte) []byte {
	b = msgp.AppendArrayHeader(b, statsFields)
	b = msgp.AppendInt64(b, int64(s.Running))
	b = msgp.AppendInt64(b, int64(s.Waiting))
	b = msgp.AppendFloat32(b, s.KVUsage)
	for _, v := range [...]int64{int64(s.NumKVBlocks), s.PrefixQueries, s.PrefixHits, s.Preemptions, int64(s.StepCount),
		s.GeneratedTokens, s.PromptTokens, s.StepTimeMicros, s.FinishedRequests, int64(s.RunningByFrontend)} {
		b = msgp.AppendInt64(b, v)
	}
	return b
}

// readHeader reads an array header and checks it against what is left:
// every element takes at least one byte.
func readHeader(b []byte, what string) (int, []byte, error) {
	n, rest, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return 0, b, fmt.Errorf("%s: %w", what, err)
	}
	if int(n) > len(rest) {
		return 0, b, fmt.Errorf("%s: length %d exceeds remaining %d bytes", what, n, len(rest))
	}
	return int(n), rest, nil
}

func readInt32s(b []byte, dst []int32, what string) ([]int32, []byte, error) {
	if msgp.IsNil(b) {
		rest, err := msgp.ReadNilBytes(b)
		return dst[:0], rest, err
	}
	n, b, err := readHeader(b, what)
	if err != nil {
		return nil, b, err
	}
	if cap(dst) < n {
		dst = make([]int32, n)
	}
	dst = dst[:n]
	for i := range dst {
		if dst[i], b, err = msgp.ReadInt32Bytes(b); err != nil {
			return nil, b, fmt.Errorf("%s: %w", what, err)
		}
	}
	return dst, b, nil
}

func skipN(b []byte, n int) ([]byte, error) {
	var err error
	for ; n > 0; n-- {
		if b, err = msgp.Skip(b); err != nil {
			return b, err
		}
	}
	return b, nil
}

// readMsg decodes o from b, reusing o's slices; request ids go through the
// intern table (nil: plain strings).
func (o *Outputs) readMsg(b []byte, intern map[string]string) ([]byte, error) {
	n, b, err := readHeader(b, "Outputs")
	if err != nil {
		return b, err
	}
	outs, stats := o.Outputs[:0], o.Stats
	*o = Outputs{}
	for i := 0; i < n && i < outputsFields; i++ {
		switch i {
		case 0:
			var s []byte
			if s, b, err = msgp.ReadStringZC(b); err == nil {
				o.EngineID = internString(intern, s)
			}
		case 1:
			o.Step, b, err = msgp.ReadUint64Bytes(b)
		case 2:
			o.Timestamp, b, err = msgp.ReadFloat64Bytes(b)
		case 3:
			var m int
			if m, b, err = readHeader(b, "Outputs.Outputs"); err != nil {
				return b, err
			}
			if cap(outs) < m {
				grown := make([]Output, m)
				copy(grown, outs[:cap(outs)])
				outs = grown
			}
			outs = outs[:m]
			for j := range outs {
				if b, err = outs[j].readMsg(b, intern); err != nil {
					return b, err
				}
				if intern != nil && outs[j].FinishReason != FinishNone {
					// Its last output: the table keeps the live requests
					// only, small enough to stay in the caches.
					delete(intern, outs[j].RequestID)
				}
			}
			o.Outputs = outs
		case 4:
			if msgp.IsNil(b) {
				b, err = msgp.ReadNilBytes(b)
				break
			}
			if stats == nil {
				stats = &SchedulerStats{}
			}
			if b, err = stats.readMsg(b); err == nil {
				o.Stats = stats
			}
		}
		if err != nil {
			return b, fmt.Errorf("Outputs field %d: %w", i, err)
		}
	}
	return skipN(b, n-outputsFields)
}

func internString(intern map[string]string, b []byte) string {
	if intern == nil {
		return string(b)
	}
	if s, ok := intern[string(b)]; ok {
		return s
	}
	if len(intern) >= maxInterned {
		clear(intern)
	}
	s := string(b)
	intern[s] = s
	return s
}

func (o *Output) readMsg(b []byte, intern map[string]string) ([]byte, error) {
	n, b, err := readHeader(b, "Output")
	if err != nil {
		return b, err
	}
	*o = Output{NewTokenIDs: o.NewTokenIDs[:0], Logprobs: o.Logprobs[:0], Events: o.Events[:0], StopReason: -1}
	for i := 0; i < n && i < outputFields; i++ {
		switch i {
		case 0:
			var s []byte
			if s, b, err = msgp.ReadStringZC(b); err == nil {
				o.RequestID = internString(intern, s)
			}
		case 1:
			o.NewTokenIDs, b, err = readInt32s(b, o.NewTokenIDs, "Output.NewTokenIDs")
		case 2:
			var m int
			if m, b, err = readHeader(b, "Output.Logprobs"); err != nil {
				return b, err
			}
			if m > 0 {
				if cap(o.Logprobs) < m {
					o.Logprobs = make([]TokenLogprobs, m)
				}
				o.Logprobs = o.Logprobs[:m]
				for j := range o.Logprobs {
					if b, err = o.Logprobs[j].readMsg(b); err != nil {
						return b, err
					}
				}
			}
		case 3:
			var f uint8
			f, b, err = msgp.ReadUint8Bytes(b)
			o.FinishReason = FinishReason(f)
		case 4:
			o.StopReason, b, err = msgp.ReadInt32Bytes(b)
		case 5:
			var m int
			if m, b, err = readHeader(b, "Output.Events"); err != nil {
				return b, err
			}
			for j := 0; j < m; j++ {
				var k int
				if k, b, err = readHeader(b, "Event"); err != nil {
					return b, err
				}
				var ev Event
				for f := 0; f < k && err == nil; f++ {
					switch f {
					case 0:
						var t uint8
						t, b, err = msgp.ReadUint8Bytes(b)
						ev.Type = EventType(t)
					case 1:
						ev.Timestamp, b, err = msgp.ReadFloat64Bytes(b)
					default:
						b, err = msgp.Skip(b)
					}
				}
				if err != nil {
					return b, err
				}
				o.Events = append(o.Events, ev)
			}
		case 6:
			o.NumCachedTokens, b, err = msgp.ReadInt32Bytes(b)
		case 7:
			var s []byte
			if s, b, err = msgp.ReadStringZC(b); err == nil && len(s) > 0 {
				o.Error = string(s)
			}
		}
		if err != nil {
			return b, fmt.Errorf("Output field %d: %w", i, err)
		}
	}
	return skipN(b, n-outputFields)
}

func (t *TokenLogprobs) readMsg(b []byte) ([]byte, error) {
	n, b, err := readHeader(b, "TokenLogprobs")
	if err != nil {
		return b, err
	}
	*t = TokenLogprobs{TopIDs: t.TopIDs[:0], TopLogprobs: t.TopLogprobs[:0]}
	for i := 0; i < n && i < tokenLogprobsFields; i++ {
		switch i {
		case 0:
			t.Logprob, b, err = msgp.ReadFloat32Bytes(b)
		case 1:
			t.Rank, b, err = msgp.ReadInt32Bytes(b)
		case 2:
			t.TopIDs, b, err = readInt32s(b, t.TopIDs, "TokenLogprobs.TopIDs")
		case 3:
			var m int
			if m, b, err = readHeader(b, "TokenLogprobs.TopLogprobs"); err != nil {
				return b, err
			}
			if cap(t.TopLogprobs) < m {
				t.TopLogprobs = make([]float32, m)
			}
			t.TopLogprobs = t.TopLogprobs[:m]
			for j := range t.TopLogprobs {
				if t.TopLogprobs[j], b, err = msgp.ReadFloat32Bytes(b); err != nil {
					return b, err
				}
			}
		}
		if err != nil {
			return b, err
		}
	}
	return skipN(b, n-tokenLogprobsFields)
}

func (s *SchedulerStats) readMsg(b []byte) ([]byte, error) {
	n, b, err := readHeader(b, "SchedulerStats")
	if err != nil {
		return b, err
	}
	*s = SchedulerStats{}
	for i := 0; i < n && i < statsFields; i++ {
		if i == 2 {
			if s.KVUsage, b, err = msgp.ReadFloat32Bytes(b); err != nil {
				return b, err
			}
			continue
		}
		var v int64
		if v, b, err = msgp.ReadInt64Bytes(b); err != nil {
			return b, fmt.Errorf("SchedulerStats field %d: %w", i, err)
		}
		s.setInt(i, v)
	}
	return skipN(b, n-statsFields)
}
