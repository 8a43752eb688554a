// Package tokfile reads the files that describe a model's tokenizer into
// plain Go values, without tokenizing anything:
//
//   - Hugging Face tokenizer.json (ReadTokenizerJSON): the model (BPE vocab
//     and merges), normalizer, pre-tokenizer, decoder, post-processor and
//     added tokens;
//   - tokenizer_config.json (ReadTokenizerConfig): chat template(s),
//     BOS/EOS strings, add_bos_token/add_eos_token;
//   - generation_config.json (ReadGenerationConfig): EOS id(s), BOS id;
//   - the tokenizer.* metadata of a GGUF file (ReadGGUFVocab);
//   - llama2.c tokenizer.bin (ReadLlama2C).
//
// Package text/tokenizer builds working tokenizers from these. Every
// reader reports malformed input as an error naming the file and the field,
// and none panics on hostile bytes.
package tokfile
