package model

import "github.com/sluice-llm/sluice/kernels"

// TokenReadBytes returns the weight bytes one batch-1 decode step reads, as
// the file stores them: every layer's weights (norms, projections, biases,
// router), the final norm and the classifier, and one row of the token
// embedding (all of it when the classifier is the tied embedding). Of an
// expert block only the TopK experts a token is routed to are read: their
// share TopK/Experts of the experts' bytes is counted (an average over
// tokens; a token's own experts may differ in size only if the file mixes
// their types). With a decode rate r in tokens per second, r ×
// TokenReadBytes is the bandwidth the step draws from memory, the figure
// that docs/bench/*.md compare with scripts/membw.c's.
func (m *Model) TokenReadBytes() int64 {
	var n int64
	for l := range m.Layers {
		L := &m.Layers[l]
		for _, t := range []kernels.Tensor{L.AttnNorm, L.Wq, L.Wk, L.Wv, L.Wo, L.Bq, L.Bk, L.Bv, L.Bo,
			L.QNorm, L.KNorm, L.FFNNorm, L.Gate, L.Up, L.Down, L.Router, L.RouterBias} {
			n += tensorBytes(t)
		}
		n += 4 * int64(len(L.Sinks))
		if len(L.Experts) > 0 && m.Cfg.MoE != nil {
			var e int64
			for _, x := range L.Experts {
				for _, t := range []kernels.Tensor{x.Gate, x.Up, x.Down, x.GateBias, x.UpBias, x.DownBias} {
					e += tensorBytes(t)
				}
			}
			n += e * int64(m.Cfg.MoE.MoE.TopK) / int64(len(L.Experts))
		}
	}
	n += tensorBytes(m.Norm) + tensorBytes(m.LMHead)
	if m.Embed != nil && m.Embed != m.LMHead {
		n += int64(m.Embed.DType().RowBytes(m.Embed.Cols()))
	}
	return n
}

// tensorBytes is the size of t as its encoding stores it (0 for nil).
func tensorBytes(t kernels.Tensor) int64 {
	if t == nil {
		return 0
	}
	return int64(t.Rows()) * int64(t.DType().RowBytes(t.Cols()))
}
