package ipc

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

const samplingFields = 19

// EncodeMsgpack writes p as a positional array in field order.
func (p *SamplingParams) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(samplingFields); err != nil {
		return err
	}
	enc := []func() error{
		func() error { return e.EncodeFloat32(p.Temperature) },
		func() error { return e.EncodeFloat32(p.TopP) },
		func() error { return e.EncodeInt(int64(p.TopK)) },
		func() error { return e.EncodeFloat32(p.MinP) },
		func() error { return e.EncodeBool(p.HasSeed) },
		func() error { return e.EncodeInt(p.Seed) },
		func() error { return e.EncodeInt(int64(p.MaxTokens)) },
		func() error { return e.EncodeInt(int64(p.MinTokens)) },
		func() error { return encodeInt32s(e, p.StopTokenIDs) },
		func() error { return e.EncodeBool(p.IgnoreEOS) },
		func() error { return e.EncodeFloat32(p.PresencePenalty) },
		func() error { return e.EncodeFloat32(p.FrequencyPenalty) },
		func() error { return e.EncodeFloat32(p.RepetitionPenalty) },
		func() error {
			if err := e.EncodeArrayLen(len(p.LogitBias)); err != nil {
				return err
			}
			for _, b := range p.LogitBias {
				if err := e.EncodeArrayLen(2); err != nil {
					return err
				}
				if err := e.EncodeInt(int64(b.Token)); err != nil {
					return err
				}
				if err := e.EncodeFloat32(b.Bias); err != nil {
					return err
				}
			}
			return nil
		},
		func() error { return encodeInt32s(e, p.AllowedTokenIDs) },
		func() error {
			if err := e.EncodeArrayLen(len(p.BadWords)); err != nil {
				return err
			}
			for _, w := range p.BadWords {
				if err := encodeInt32s(e, w); err != nil {
					return err
				}
			}
			return nil
		},
		func() error { return e.EncodeInt(int64(p.Logprobs)) },
		func() error {
			if p.Constraint == nil {
				return e.EncodeNil()
			}
			c := p.Constraint
			if err := e.EncodeArrayLen(4); err != nil {
				return err
			}
			if err := e.EncodeString(c.Kind); err != nil {
				return err
			}
			if err := e.EncodeString(c.Spec); err != nil {
				return err
			}
			if err := e.EncodeString(c.Hash); err != nil {
				return err
			}
			return e.EncodeBool(c.AfterReasoning)
		},
		func() error { return e.EncodeNil() }, // reserved
	}
	for _, f := range enc {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack reads what EncodeMsgpack wrote (or a shorter array).
func (p *SamplingParams) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := arrayHeader(d, "SamplingParams")
	if err != nil {
		return err
	}
	*p = SamplingParams{Logprobs: -1}
	for i := 0; i < n && i < samplingFields; i++ {
		switch i {
		case 0:
			p.Temperature, err = d.DecodeFloat32()
		case 1:
			p.TopP, err = d.DecodeFloat32()
		case 2:
			p.TopK, err = d.DecodeInt32()
		case 3:
			p.MinP, err = d.DecodeFloat32()
		case 4:
			p.HasSeed, err = d.DecodeBool()
		case 5:
			p.Seed, err = d.DecodeInt64()
		case 6:
			p.MaxTokens, err = d.DecodeInt32()
		case 7:
			p.MinTokens, err = d.DecodeInt32()
		case 8:
			p.StopTokenIDs, err = decodeInt32s(d, nil, "SamplingParams.StopTokenIDs")
		case 9:
			p.IgnoreEOS, err = d.DecodeBool()
		case 10:
			p.PresencePenalty, err = d.DecodeFloat32()
		case 11:
			p.FrequencyPenalty, err = d.DecodeFloat32()
		case 12:
			p.RepetitionPenalty, err = d.DecodeFloat32()
		case 13:
			var m int
			if m, err = arrayHeader(d, "SamplingParams.LogitBias"); err != nil {
				return err
			}
			for j := 0; j < m; j++ {
				var k int
				if k, err = arrayHeader(d, "LogitBias"); err != nil {
					return err
				}
				var b LogitBias
				for f := 0; f < k && err == nil; f++ {
					switch f {
					case 0:
						b.Token, err = d.DecodeInt32()
					case 1:
						b.Bias, err = d.DecodeFloat32()
					default:
						err = d.Skip()
					}
				}
				if err != nil {
					return err
				}
				p.LogitBias = append(p.LogitBias, b)
			}
		case 14:
			p.AllowedTokenIDs, err = decodeInt32s(d, nil, "SamplingParams.AllowedTokenIDs")
		case 15:
			var m int
			if m, err = arrayHeader(d, "SamplingParams.BadWords"); err != nil {
				return err
			}
			for j := 0; j < m; j++ {
				var w []int32
				if w, err = decodeInt32s(d, nil, "SamplingParams.BadWords"); err != nil {
					return err
				}
				p.BadWords = append(p.BadWords, w)
			}
		case 16:
			p.Logprobs, err = d.DecodeInt32()
		case 17:
			var null bool
			if null, err = isNil(d); err != nil || null {
				break
			}
			var k int
			if k, err = arrayHeader(d, "Constraint"); err != nil {
				return err
			}
			c := &Constraint{}
			for f := 0; f < k && err == nil; f++ {
				switch f {
				case 0:
					c.Kind, err = d.DecodeString()
				case 1:
					c.Spec, err = d.DecodeString()
				case 2:
					c.Hash, err = d.DecodeString()
				case 3:
					c.AfterReasoning, err = d.DecodeBool()
				default:
					err = d.Skip()
				}
			}
			p.Constraint = c
		default:
			err = d.Skip()
		}
		if err != nil {
			return fmt.Errorf("SamplingParams field %d: %w", i, err)
		}
	}
	return skipRest(d, n, samplingFields)
}

const addFields = 5

// EncodeMsgpack writes r as [RequestID, PromptTokenIDs, Params, ArrivalTime, Priority].
func (r *AddRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(addFields); err != nil {
		return err
	}
	if err := e.EncodeString(r.RequestID); err != nil {
		return err
	}
	if err := encodeInt32s(e, r.PromptTokenIDs); err != nil {
		return err
	}
	if err := r.Params.EncodeMsgpack(e); err != nil {
		return err
	}
	if err := e.EncodeFloat64(r.ArrivalTime); err != nil {
		return err
	}
	return e.EncodeInt(int64(r.Priority))
}

// DecodeMsgpack reads what EncodeMsgpack wrote (or a shorter array).
func (r *AddRequest) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := arrayHeader(d, "AddRequest")
	if err != nil {
		return err
	}
	*r = AddRequest{Params: SamplingParams{Logprobs: -1}}
	for i := 0; i < n && i < addFields; i++ {
		switch i {
		case 0:
			r.RequestID, err = d.DecodeString()
		case 1:
			r.PromptTokenIDs, err = decodeInt32s(d, nil, "AddRequest.PromptTokenIDs")
		case 2:
			err = r.Params.DecodeMsgpack(d)
		case 3:
			r.ArrivalTime, err = d.DecodeFloat64()
		case 4:
			r.Priority, err = d.DecodeInt32()
		}
		if err != nil {
			return fmt.Errorf("AddRequest field %d: %w", i, err)
		}
	}
	return skipRest(d, n, addFields)
}
