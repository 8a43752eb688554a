// Command engine-core is Sluice's engine process: it binds one ZeroMQ
// ROUTER that api-frontend processes connect to, schedules their requests
// with continuous batching and a paged KV cache, runs the model (or the
// simulated accelerator) and streams each step's tokens back.
//
//	engine-core --model M [--listen ADDR] [--executor cpu|sim] [--max-num-seqs N]
//	    [--max-num-batched-tokens N] [--max-model-len N] [--block-size N]
//	    [--kv-cache-memory BYTES] [--num-kv-blocks N] [--scheduler-idle-wait auto|DURATION] [--sim-step-ms F]
//	    [--sim-script FILE] [--tokenizer FILE] [--served-model-name NAME]
//	    [--config FILE] [--log-format json|console] [--log-level LEVEL]
//	engine-core gen-model --out DIR [--shape tiny|15m|110m|1b-v32k|llama3.2-1b|qwen3-0.6b|gpt-oss-20b|qwen3-30b-a3b|…] [--seed N]
//	    [--format hf|gguf|gguf-f16|gguf-bf16|gguf-q8_0|gguf-q4_0|gguf-q4_k_m|gguf-q5_k_m|gguf-q6_k|gguf-mxfp4]
//	    (hf: the small Llama shapes, and the gpt-oss shapes in openai/gpt-oss-20b's sharded MXFP4 layout)
//
// Every flag can also come from a YAML file (--config) or the environment
// (SLUICE_MAX_NUM_SEQS, …); see configs.Engine. On SIGTERM or SIGINT the
// engine refuses new requests, lets running ones finish for
// --shutdown-timeout, sends SHUTDOWN to every frontend and exits 0. It exits
// 2 on bad configuration and 1 when the model cannot be loaded or the KV
// cache is too small for --max-model-len.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sluice-llm/sluice/configs"
	"github.com/sluice-llm/sluice/engine-core/engine"
	"github.com/sluice-llm/sluice/modelfile/demo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is main with its arguments and error stream: flags → configuration →
// engine.Run. It returns the exit status.
func run(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "gen-model" {
		if err := demo.Main(args[1:]); err != nil {
			fmt.Fprintf(stderr, "engine-core gen-model: %v\n", err)
			return 2
		}
		return 0
	}
	cfg := configs.DefaultEngine()
	rest, err := configs.Load("engine-core", args, &cfg, stderr)
	if configs.IsHelp(err) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "engine-core: %v\n", err)
		return 2
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "engine-core: unexpected arguments %q\n", rest)
		return 2
	}
	return engine.Run(&cfg, stderr)
}
