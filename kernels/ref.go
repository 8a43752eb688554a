package kernels

import (
	"encoding/binary"
	"math"

	"github.com/sluice-llm/sluice/quant"
)

// Dot returns the dot product of a and b[:len(a)].
func Dot(a, b []float32) float32 {
	var s float32
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

// DotQ8_0 returns the dot product of x with one Q8_0-encoded row q of
// len(x) values.
func DotQ8_0(x []float32, q []byte) float32 {
	var s float32
	for b := 0; b < len(x)/Q8Block; b++ {
		blk := q[b*Q8BlockBytes:]
		d := quant.F16ToF32(binary.LittleEndian.Uint16(blk))
		var bs float32
		xb := x[b*Q8Block : (b+1)*Q8Block]
		for j, v := range xb {
			bs += v * float32(int8(blk[2+j]))
		}
		s += d * bs
	}
	return s
}

// MatMulRef sets out[:n] = x[:n] · wᵀ on host tensors (any weight type):
// each weight row is decoded with the reference decoders and the products
// are summed in float64, the oracle for the fast kernels.
func MatMulRef(out, x, w *Host, n int) {
	in := w.C
	row := make([]float32, in)
	for o := 0; o < w.R; o++ {
		w.RowF32(row, o)
		for i := 0; i < n; i++ {
			xr := x.F[i*x.C : i*x.C+in]
			var s float64
			for j, v := range xr {
				s += float64(v) * float64(row[j])
			}
			out.F[i*out.C+o] = float32(s)
		}
	}
}

// RMSNorm sets out = x / sqrt(mean(x²) + eps) * w for one chunk.
func RMSNorm(out, x, w []float32, eps float32) {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	inv := float32(1 / math.Sqrt(float64(ss/float32(len(x))+eps)))
	for i, v := range x {
		out[i] = v * inv * w[i]
	}
}

// RoPE rotates one head in place. cs holds headDim/2 cosines then
// headDim/2 sines for the head's position.
func RoPE(h []float32, cs []float32, style RoPEStyle) {
	half := len(h) / 2
	for j := 0; j < half; j++ {
		c, s := cs[j], cs[half+j]
		a, b := 2*j, 2*j+1
		if style == RoPEHalf {
			a, b = j, j+half
		}
		x0, x1 := h[a], h[b]
		h[a] = x0*c - x1*s
		h[b] = x0*s + x1*c
	}
}

// SiLU returns x·sigmoid(x).
func SiLU(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// Softmax turns x into probabilities in place (max-subtracted).
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	var sum float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - m)))
		x[i] = e
		sum += e
	}
	inv := 1 / sum
	for i := range x {
		x[i] *= inv
	}
}

// AttendRow computes attention for one query row (all heads) over the paged
// cache of one sequence: the query is at position ctx-1 and attends to
// positions [s.AttnFirst(ctx-1), ctx) with blocks from table, and to the
// head's sink logit when s.Sinks is set. scores is scratch of at least ctx
// floats. out receives heads*headDim values.
func AttendRow(out, q []float32, kc, vc *Host, table []int32, blockSize, ctx int, s AttnShape, scores []float32) {
	kvDim := s.KVHeads * s.HeadDim
	group := s.Heads / s.KVHeads
	first := s.AttnFirst(ctx - 1)
	for h := 0; h < s.Heads; h++ {
		qh := q[h*s.HeadDim : (h+1)*s.HeadDim]
		off := (h / group) * s.HeadDim
		sc := scores[first:ctx]
		for p := first; p < ctx; p++ {
			slot := int(table[p/blockSize])*blockSize + p%blockSize
			sc[p-first] = Dot(qh, kc.F[slot*kvDim+off:slot*kvDim+off+s.HeadDim]) * s.Scale
		}
		if s.Sinks != nil {
			softmaxSink(sc, s.Sinks[h])
		} else {
			Softmax(sc)
		}
		oh := out[h*s.HeadDim : (h+1)*s.HeadDim]
		clear(oh)
		for p := first; p < ctx; p++ {
			slot := int(table[p/blockSize])*blockSize + p%blockSize
			vr := vc.F[slot*kvDim+off : slot*kvDim+off+s.HeadDim]
			w := sc[p-first]
			for d := range oh {
				oh[d] += w * vr[d]
			}
		}
	}
}

// softmaxSink is Softmax over x together with one extra logit, sink, whose
// probability is dropped: x[i] = exp(x[i]) / (exp(sink) + Σ exp(x[j])).
func softmaxSink(x []float32, sink float32) {
	mx := sink
	for _, v := range x {
		mx = max(mx, v)
	}
	sum := math.Exp(float64(sink - mx))
	for i, v := range x {
		e := math.Exp(float64(v - mx))
		x[i] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// Ref is the reference Backend: the plain kernels of this package on one
// goroutine, over Host tensors. It is the oracle the fast backends are
// checked against, not something to serve with.
type Ref struct {
	scores []float32
}

// NewRef returns a reference backend.
func NewRef() *Ref { return &Ref{} }

// Name returns "ref".
func (r *Ref) Name() string { return "ref" }

// Weight makes a Host tensor over data.
func (r *Ref) Weight(dt DType, rows, cols int, data []byte) (Tensor, error) {
	return NewHostWeight(dt, rows, cols, data)
}

// WeightF32 makes a Host tensor over data.
func (r *Ref) WeightF32(rows, cols int, data []float32) (Tensor, error) {
	return &Host{R: rows, C: cols, DT: F32, F: data}, nil
}

// Alloc makes a zeroed F32 Host tensor.
func (r *Ref) Alloc(rows, cols int) Tensor {
	return &Host{R: rows, C: cols, DT: F32, F: make([]float32, rows*cols)}
}

// MatMul implements Backend.
func (r *Ref) MatMul(out, x, w Tensor, n int) {
	MatMulRef(out.(*Host), x.(*Host), w.(*Host), n)
}

// AddRow implements Backend.
func (r *Ref) AddRow(x, b Tensor, n int) {
	xh, bh := x.(*Host), b.(*Host)
	for i := 0; i < n; i++ {
		row := xh.Row(i)
		for j := range row {
			row[j] += bh.F[j]
		}
	}
}

// Add implements Backend.
func (r *Ref) Add(out, a, b Tensor, n int) {
	oh, ah, bh := out.(*Host), a.(*Host), b.(*Host)
	m := n * oh.C
	for i := 0; i < m; i++ {
		oh.F[i] = ah.F[i] + bh.F[i]
	}
}

// RMSNorm implements Backend.
func (r *Ref) RMSNorm(out, x, w Tensor, n int, eps float32) {
	oh, xh, wh := out.(*Host), x.(*Host), w.(*Host)
	c := wh.C
	for i := 0; i < n*xh.C; i += c {
		RMSNorm(oh.F[i:i+c], xh.F[i:i+c], wh.F, eps)
	}
}

// RoPE implements Backend.
func (r *Ref) RoPE(x Tensor, pos []int32, table Tensor, headDim int, style RoPEStyle) {
	xh, th := x.(*Host), table.(*Host)
	for i, p := range pos {
		row := xh.Row(i)
		cs := th.Row(int(p))
		for h := 0; h+headDim <= len(row); h += headDim {
			RoPE(row[h:h+headDim], cs, style)
		}
	}
}

// SiLUMul implements Backend.
func (r *Ref) SiLUMul(out, gate, up Tensor, n int) {
	oh, gh, uh := out.(*Host), gate.(*Host), up.(*Host)
	for i := 0; i < n*oh.C; i++ {
		oh.F[i] = SiLU(gh.F[i]) * uh.F[i]
	}
}

// Embed implements Backend.
func (r *Ref) Embed(out, table Tensor, tokens []int32) {
	oh, th := out.(*Host), table.(*Host)
	for i, t := range tokens {
		th.RowF32(oh.Row(i)[:th.C], int(t))
	}
}

// Gather implements Backend.
func (r *Ref) Gather(out, x Tensor, rows []int32) {
	oh, xh := out.(*Host), x.(*Host)
	for i, src := range rows {
		copy(oh.Row(i), xh.Row(int(src)))
	}
}

// WriteKV implements Backend.
func (r *Ref) WriteKV(kCache, vCache, k, v Tensor, a *AttnBatch) {
	kc, vc, kh, vh := kCache.(*Host), vCache.(*Host), k.(*Host), v.(*Host)
	for i, slot := range a.Slots {
		copy(kc.Row(int(slot)), kh.Row(i))
		copy(vc.Row(int(slot)), vh.Row(i))
	}
}

// Attention implements Backend.
func (r *Ref) Attention(out, q, kCache, vCache Tensor, a *AttnBatch, s AttnShape) {
	oh, qh, kc, vc := out.(*Host), q.(*Host), kCache.(*Host), vCache.(*Host)
	for sq := 0; sq < a.NumSeqs(); sq++ {
		q0, q1 := int(a.QStart[sq]), int(a.QStart[sq+1])
		ctx := int(a.CtxLen[sq])
		table := a.Tables[a.TableStart[sq]:a.TableStart[sq+1]]
		if cap(r.scores) < ctx {
			r.scores = make([]float32, ctx)
		}
		for i := q0; i < q1; i++ {
			upto := ctx - (q1 - i) + 1 // causal: positions <= own
			AttendRow(oh.Row(i), qh.Row(i), kc, vc, table, a.BlockSize, upto, s, r.scores)
		}
	}
}

// ToHost implements Backend.
func (r *Ref) ToHost(t Tensor, n int) []float32 {
	h := t.(*Host)
	return h.F[:n*h.C]
}

// Close implements Backend.
func (r *Ref) Close() {}
