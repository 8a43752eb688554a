package runner

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/sluice-llm/sluice/engine-core/memstat"
)

// KVMemFraction is the share of the memory left after the weights that the
// default KV-cache budget takes (the rest stays for activations, the
// frontend, the page cache and other processes; vLLM's
// gpu_memory_utilization plays this part on a GPU).
const KVMemFraction = 0.5

// DefaultKVBudget is the KV-cache memory the engine takes when neither
// --kv-cache-memory nor --num-kv-blocks is given: what maxSeqs sequences of
// maxLen positions need, capped at KVMemFraction of the memory available
// (memAvailable, as /proc/meminfo reports it) once the weights that may not
// be resident yet (weightBytes: the memory-mapped ones; weights copied
// into the process at load time are already out of memAvailable) are
// counted out, and at least one block.
// It returns the budget and a one-line account of how it was chosen, for
// the start-up log.
func DefaultKVBudget(memAvailable, weightBytes, perBlock int64, blockSize, maxLen, maxSeqs int) (int64, string) {
	need := int64(maxSeqs) * int64((maxLen+blockSize-1)/blockSize) * perBlock
	free := max(0, memAvailable-weightBytes)
	capBytes := int64(KVMemFraction * float64(free))
	budget := min(need, capBytes)
	why := fmt.Sprintf("default: max-num-seqs × max-model-len (%d × %d) needs %d MiB", maxSeqs, maxLen, need>>20)
	if capBytes < need {
		why = fmt.Sprintf("default: %.0f%% of MemAvailable %d MiB after %d MiB of mapped weights (max-num-seqs × max-model-len = %d × %d would need %d MiB)",
			100*KVMemFraction, memAvailable>>20, weightBytes>>20, maxSeqs, maxLen, need>>20)
	}
	return max(budget, perBlock), why
}

// MemAvailable reads MemAvailable from /proc/meminfo, in bytes.
func MemAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("read meminfo: %w", err)
	}
	return parseMemAvailable(b)
}

// parseMemAvailable finds the "MemAvailable: N kB" line of a meminfo file.
func parseMemAvailable(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemAvailable:" {
			n, err := memstat.ParseKB(string(bytes.TrimPrefix(bytes.TrimSpace(sc.Bytes()), f[0])))
			if err != nil {
				return 0, fmt.Errorf("parse meminfo: MemAvailable: %w", err)
			}
			return n, nil
		}
	}
	return 0, errors.New("parse meminfo: no MemAvailable line")
}
