package model

import (
	"github.com/sluice-llm/sluice/kernels"
)

// DefaultScratchRows is the number of token rows NewScratch gives the
// per-token activations when the backend's tensors are host memory: a
// larger batch runs through the model in passes of at most this many rows
// (Forward's sub-batches), so the scratch does not grow with the step's
// token budget (--max-num-batched-tokens). 256 rows keep every batch tile
// of the CPU kernels full (they take 8 activation rows at a time) while the
// weights are read once per 256 tokens: under 2 % of a prefill pass's time
// at the 1B shape.
const DefaultScratchRows = 256

// Scratch holds the activations of one forward pass, for batches of up to
// MaxTokens rows in and MaxOut rows of logits out. The per-token tensors
// have Rows() rows; a batch with more tokens runs in passes of Rows() rows
// (only on backends whose tensors are kernels.Host, the CPU backends; on
// the others Rows() is MaxTokens).
type Scratch struct {
	MaxTokens, MaxOut int

	x, xb, q, k, v, att, gate, up kernels.Tensor
	last, logits                  kernels.Tensor
	moe                           *moeScratch
	// mmOut and mmW hold the outputs and weights of one MatMulShared call
	// (q, k, v or gate, up), so that passing them allocates nothing
	mmOut, mmW [3]kernels.Tensor

	// rows is the row count of the per-token tensors; sub says that the
	// backend's tensors are kernels.Host, so that a batch larger than
	// rows can run in passes.
	rows int
	sub  bool
	// sb describes the current pass of a batch larger than rows, and
	// lastRow / outRow hold one row of last and its source row, reused
	// (Forward allocates nothing).
	sb      subBatch
	lastRow kernels.Host
	outRow  [1]int32
	bytes   int64
}

// NewScratch allocates activations for batches of up to maxTokens tokens of
// which up to maxOut need logits: on a host backend, per-token tensors of
// min(maxTokens, DefaultScratchRows) rows (see Scratch).
func (m *Model) NewScratch(maxTokens, maxOut int) *Scratch {
	return m.NewScratchRows(maxTokens, maxOut, DefaultScratchRows)
}

// NewScratchRows is NewScratch with a row budget of rows (≥ 1) per pass in
// place of DefaultScratchRows.
func (m *Model) NewScratchRows(maxTokens, maxOut, rows int) *Scratch {
	c, be := &m.Cfg, m.be
	maxTokens, maxOut, rows = max(maxTokens, 1), max(maxOut, 1), max(rows, 1)
	s := &Scratch{MaxTokens: maxTokens, MaxOut: maxOut, rows: maxTokens}
	s.last = be.Alloc(maxOut, c.Dim)
	if _, ok := s.last.(*kernels.Host); ok {
		s.sub = true
		s.rows = min(maxTokens, rows)
	}
	r := s.rows
	s.x, s.xb = be.Alloc(r, c.Dim), be.Alloc(r, c.Dim)
	s.q, s.k, s.v = be.Alloc(r, c.QDim()), be.Alloc(r, c.KVDim()), be.Alloc(r, c.KVDim())
	s.att, s.gate, s.up = be.Alloc(r, c.QDim()), be.Alloc(r, c.Hidden), be.Alloc(r, c.Hidden)
	s.logits = be.Alloc(maxOut, c.Vocab)
	s.moe = m.newMoEScratch(r)
	for _, t := range []kernels.Tensor{s.x, s.xb, s.q, s.k, s.v, s.att, s.gate, s.up, s.last, s.logits} {
		s.bytes += 4 * int64(t.Rows()) * int64(t.Cols())
	}
	s.bytes += s.moe.bytes()
	return s
}

// Rows returns the number of token rows of the per-token activations: the
// most tokens one pass of Forward runs.
func (s *Scratch) Rows() int { return s.rows }

// Bytes returns the memory of the scratch's activations (F32 tensors and
// the expert blocks' host-side routing), excluding the backend's own
// per-op working memory.
func (s *Scratch) Bytes() int64 { return s.bytes }

// gatherOut copies to row i of s.last the final hidden state of each
// b.OutRows[i] in [lo, hi), the rows of the pass whose output is in s.x.
func (s *Scratch) gatherOut(be kernels.Backend, outRows []int32, lo, hi int) {
	last := s.last.(*kernels.Host)
	for i, r := range outRows {
		if int(r) < lo || int(r) >= hi {
			continue
		}
		s.lastRow = kernels.Host{R: 1, C: last.C, DT: kernels.F32, F: last.F[i*last.C : (i+1)*last.C]}
		s.outRow[0] = r - int32(lo)
		be.Gather(&s.lastRow, s.x, s.outRow[:])
	}
}

// subBatch is one pass, rows [lo, hi), of a batch larger than the scratch:
// the attention description of just those rows. A sequence cut by the
// pass boundary contributes its rows inside [lo, hi), and its context ends
// at the last of them (the earlier pass has written the keys and values
// before them).
type subBatch struct {
	attn, win kernels.AttnBatch
}

// slice sets sb to rows [lo, hi) of b (and of b.WinAttn when win).
func (sb *subBatch) slice(b *Batch, win bool, lo, hi int) {
	a, sa, sw := &b.Attn, &sb.attn, &sb.win
	sa.QStart, sa.CtxLen, sa.Tables, sa.TableStart = append(sa.QStart[:0], 0), sa.CtxLen[:0], sa.Tables[:0], append(sa.TableStart[:0], 0)
	sa.BlockSize, sa.Slots = a.BlockSize, a.Slots[lo:hi]
	sw.Tables, sw.TableStart = sw.Tables[:0], append(sw.TableStart[:0], 0)
	for q := range a.NumSeqs() {
		qs, qe := int(a.QStart[q]), int(a.QStart[q+1])
		if qe <= lo || qs >= hi {
			continue
		}
		end := min(qe, hi)
		sa.QStart = append(sa.QStart, int32(end-lo))
		sa.CtxLen = append(sa.CtxLen, a.CtxLen[q]-int32(qe-end))
		sa.Tables = append(sa.Tables, a.Tables[a.TableStart[q]:a.TableStart[q+1]]...)
		sa.TableStart = append(sa.TableStart, int32(len(sa.Tables)))
		if win {
			w := &b.WinAttn
			sw.Tables = append(sw.Tables, w.Tables[w.TableStart[q]:w.TableStart[q+1]]...)
			sw.TableStart = append(sw.TableStart, int32(len(sw.Tables)))
		}
	}
	if win {
		sw.QStart, sw.CtxLen, sw.BlockSize, sw.Slots = sa.QStart, sa.CtxLen, b.WinAttn.BlockSize, b.WinAttn.Slots[lo:hi]
	}
}

// bytes is the memory of the expert blocks' scratch (0 for nil: a dense
// model).
func (ms *moeScratch) bytes() int64 {
	if ms == nil {
		return 0
	}
	var n int64
	for _, t := range []kernels.Tensor{ms.rlog, ms.ex, ms.ey, ms.eg, ms.eu} {
		n += 4 * int64(t.Rows()) * int64(t.Cols())
	}
	return n + 4*int64(len(ms.choice)+len(ms.weight)+len(ms.count)+len(ms.order)+len(ms.rows)+len(ms.rowWeights))
}
