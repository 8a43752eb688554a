// Package guide is the engine side of structured outputs: it matches a
// constraint (lowered by constraint to a grammar IR) against a
// model's vocabulary token by token and computes, at each step, the mask of
// tokens that keep the output inside the constraint.
//
// Design (after llguidance): the vocabulary is a flattened token trie built
// once per model; each grammar terminal is a regex run by a lazily
// determinised byte automaton; the grammar runs as a nondeterministic
// pushdown automaton (a set of threads, each a terminal position, an
// automaton state and an interned return stack); a mask is a walk of the
// trie with checkpoints per depth. Two caches make it cheap: per terminal
// state, the tokens that stay inside the terminal (computed once, shared by
// every grammar using that regex, e.g. "inside a JSON string"), so only the
// subtrees where a terminal can end mid-token need the parser; and per
// grammar, finished masks keyed by the full matcher state, with a memo of
// the transitions between those states, so that on a repeated (state,
// token) Accept and the next Mask are a table lookup each. Computing a
// wide terminal state uses precomputed vocabulary slices (runs of plain
// JSON-string characters, and runs of plain or of ASCII letters and digits
// sorted by length for maxLength-bounded strings and identifier-like
// patterns), so only the rest of the vocabulary is walked, with a
// branch-light loop over the flattened trie.
//
// Limits (sound: past them the matcher allows less, never more): 4096
// threads per state, 65536 closure expansions per byte, 32768 automaton
// states per terminal; masks with nothing allowed force EOS and are
// counted in Matcher.DeadEnds.
//
// Use: NewVocab (or FromTokenizer) once per model; NewCompiler once; per
// request Compiler.Matcher (or CompileAsync then Grammar.NewMatcher); per
// step Matcher.Mask then Matcher.Accept.
package guide

import (
	"container/list"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/ipc"
)

// ErrCompileTimeout is returned when a grammar is not ready by the
// request's deadline (compilation goes on and its result is cached).
var ErrCompileTimeout = errors.New("guide: grammar compilation timed out")

// Options tune a Compiler. Zero values select the defaults.
type Options struct {
	// CacheSize is how many compiled grammars (and compile failures) are
	// kept, least recently used evicted first. Default 64.
	CacheSize int
	// CacheBytes bounds the estimated memory (constraint.EstimateBytes) of
	// the cached grammars together; past it the least recently used are
	// evicted (a grammar in use by a request stays alive until it ends).
	// Default DefaultGrammarCacheBytes (engine-core --grammar-cache-bytes).
	CacheBytes int64
	// MaxGrammarBytes refuses a grammar whose estimated compiled size
	// (constraint.EstimateBytes) is larger. Default
	// constraint.MaxGrammarBytes (engine-core --max-grammar-bytes).
	MaxGrammarBytes int64
	// MaskCacheBytes bounds each grammar's state→mask cache, and half of
	// it each grammar's transition memo (see memo.go). Default 8 MiB.
	MaskCacheBytes int
	// MaxDFAStates caps each terminal's lazy automaton. Default 32768.
	MaxDFAStates int
	// MaxTerminals bounds the shared terminal cache. Default 4096.
	MaxTerminals int
	// ReasoningEnd is the text after which AfterReasoning constraints
	// start. Default "</think>".
	ReasoningEnd string
	// LexemeCacheBytes bounds the per-terminal-state masks kept across
	// all grammars. Default 512 MiB.
	LexemeCacheBytes int64
	// CompileWorkers bounds concurrent compilations. Default
	// max(1, GOMAXPROCS/2).
	CompileWorkers int
}

// DefaultGrammarCacheBytes is the default of Options.CacheBytes.
const DefaultGrammarCacheBytes = 128 << 20

// Compiler compiles constraints against one vocabulary and caches the
// results. It is safe for concurrent use.
type Compiler struct {
	vocab *Vocab
	opts  Options

	mu      sync.Mutex // guards lru, entries, cacheBytes and terms
	lru     *list.List // of *entry, most recent first
	entries map[string]*list.Element
	// cacheBytes is the sum of the cached entries' bytes.
	cacheBytes int64
	terms      map[string]*terminal
	// budget is what is left of LexemeCacheBytes.
	budget atomic.Int64
	// workers holds one token per running compilation.
	workers chan struct{}
}

type entry struct {
	key   string
	ready chan struct{}
	g     *Grammar
	err   error
	// bytes is the grammar's estimated size once built (under mu).
	bytes int64
}

// NewCompiler returns a compiler for vocab keeping cacheSize grammars.
func NewCompiler(vocab *Vocab, cacheSize int) *Compiler {
	return NewCompilerWithOptions(vocab, Options{CacheSize: cacheSize})
}

// NewCompilerWithOptions returns a compiler with explicit options.
func NewCompilerWithOptions(vocab *Vocab, o Options) *Compiler {
	if o.CacheSize <= 0 {
		o.CacheSize = 64
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultGrammarCacheBytes
	}
	if o.MaskCacheBytes <= 0 {
		o.MaskCacheBytes = 8 << 20
	}
	if o.MaxGrammarBytes <= 0 {
		o.MaxGrammarBytes = constraint.MaxGrammarBytes
	}
	if o.MaxTerminals <= 0 {
		o.MaxTerminals = 4096
	}
	if o.ReasoningEnd == "" {
		o.ReasoningEnd = "</think>"
	}
	if o.LexemeCacheBytes <= 0 {
		o.LexemeCacheBytes = 512 << 20
	}
	if o.CompileWorkers <= 0 {
		o.CompileWorkers = max(1, runtime.GOMAXPROCS(0)/2)
	}
	c := &Compiler{vocab: vocab, opts: o, lru: list.New(), entries: map[string]*list.Element{},
		terms: map[string]*terminal{}, workers: make(chan struct{}, o.CompileWorkers)}
	c.budget.Store(o.LexemeCacheBytes)
	return c
}

// Vocab returns the compiler's vocabulary.
func (c *Compiler) Vocab() *Vocab { return c.vocab }

// Stats describes a compiler's caches (for metrics).
type Stats struct {
	Grammars  int   // compiled grammars and failures cached
	Bytes     int64 // their estimated size
	Terminals int   // shared terminal automata
}

// Stats returns the current cache sizes.
func (c *Compiler) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Grammars: c.lru.Len(), Bytes: c.cacheBytes, Terminals: len(c.terms)}
}

// CompileResult is what CompileAsync delivers.
type CompileResult struct {
	Grammar *Grammar
	Err     error
}

func key(ct ipc.Constraint) string {
	if ct.Hash != "" {
		return ct.Kind + ":" + ct.Hash
	}
	return ct.Kind + "\x00" + ct.Spec
}

// CompileAsync starts compiling ct off the caller's goroutine (or finds it
// cached) and delivers the result on the returned channel: the grammar, the
// compile error, or ErrCompileTimeout if it is not ready by deadline (zero:
// no deadline). Failures are cached like successes.
func (c *Compiler) CompileAsync(ct ipc.Constraint, deadline time.Time) <-chan CompileResult {
	out := make(chan CompileResult, 1)
	e := c.lookup(ct)
	select {
	case <-e.ready:
		out <- CompileResult{e.g, e.err}
		return out
	default:
	}
	go func() {
		var timeout <-chan time.Time
		if !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-e.ready:
			out <- CompileResult{e.g, e.err}
		case <-timeout:
			out <- CompileResult{nil, fmt.Errorf("%s constraint %.12s: %w", ct.Kind, ct.Hash, ErrCompileTimeout)}
		}
	}()
	return out
}

// Compile compiles ct (or returns it cached), waiting until deadline.
func (c *Compiler) Compile(ct ipc.Constraint, deadline time.Time) (*Grammar, error) {
	r := <-c.CompileAsync(ct, deadline)
	return r.Grammar, r.Err
}

// Matcher compiles ct (cached) and returns a fresh matcher for it,
// honouring ct.AfterReasoning.
func (c *Compiler) Matcher(ct ipc.Constraint, deadline time.Time) (*Matcher, error) {
	g, err := c.Compile(ct, deadline)
	if err != nil {
		return nil, err
	}
	return g.NewMatcher(ct.AfterReasoning), nil
}

// lookup returns the cache entry of ct, starting its compilation when new.
func (c *Compiler) lookup(ct ipc.Constraint) *entry {
	k := key(ct)
	c.mu.Lock()
	if el, ok := c.entries[k]; ok {
		c.lru.MoveToFront(el)
		c.mu.Unlock()
		return el.Value.(*entry)
	}
	e := &entry{key: k, ready: make(chan struct{})}
	el := c.lru.PushFront(e)
	c.entries[k] = el
	c.evict()
	c.mu.Unlock()
	go func() {
		c.workers <- struct{}{}
		e.g, e.err = c.build(ct)
		<-c.workers
		c.mu.Lock()
		if c.entries[k] == el && e.g != nil {
			e.bytes = e.g.bytes
			c.cacheBytes += e.bytes
			c.evict()
		}
		c.mu.Unlock()
		close(e.ready)
	}()
	return e
}

// evict drops least recently used entries while the cache holds more than
// CacheSize entries or CacheBytes bytes (keeping the most recent one).
// Called with mu held.
func (c *Compiler) evict() {
	for c.lru.Len() > 1 && (c.lru.Len() > c.opts.CacheSize || c.cacheBytes > c.opts.CacheBytes) {
		old := c.lru.Back()
		c.lru.Remove(old)
		e := old.Value.(*entry)
		delete(c.entries, e.key)
		c.cacheBytes -= e.bytes
	}
}

// build compiles a constraint synchronously, without the grammar cache.
func (c *Compiler) build(ct ipc.Constraint) (*Grammar, error) {
	ir, err := constraint.CompileLimit(ct, c.opts.MaxGrammarBytes)
	if err != nil {
		return nil, err
	}
	g, err := build(ir, c.vocab, c.terminal)
	if err != nil {
		return nil, fmt.Errorf("%s constraint: %w", ct.Kind, err)
	}
	g.hash = ct.Hash
	g.bytes = constraint.EstimateBytes(ir)
	g.masks = newMaskCache(c.opts.MaskCacheBytes)
	g.memo = newMemo(c.opts.MaskCacheBytes / 2)
	g.reasoningEnd = []byte(c.opts.ReasoningEnd)
	return g, nil
}

// terminal returns the shared automaton of a pattern.
func (c *Compiler) terminal(pattern string) (*terminal, error) {
	c.mu.Lock()
	t := c.terms[pattern]
	c.mu.Unlock()
	if t != nil {
		return t, nil
	}
	t, err := newTerminal(pattern, c.opts.MaxDFAStates)
	if err != nil {
		return nil, err
	}
	t.budget = &c.budget
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.terms[pattern]; old != nil {
		return old, nil
	}
	if len(c.terms) >= c.opts.MaxTerminals {
		c.terms = map[string]*terminal{} // grammars keep their own pointers
	}
	c.terms[pattern] = t
	return t, nil
}

// warmText is a JSON object touching the common lexeme states (strings,
// escapes, numbers, literals, nesting).
const warmText = `{"key": "value with spaces, \\ \"quotes\" and \u00e9", "n": -12.5e3, "i": 0, "b": [true, false, null], "o": {"x": {}}}`

// Warm precomputes the shared lexeme caches of generic JSON (the states
// every JSON schema and json_object use), so the first constrained request
// does not pay for them. It walks warmText with masks computed at every
// byte; it takes tens of milliseconds at 150k tokens.
func (c *Compiler) Warm() error {
	g, err := c.build(constraint.JSONObject())
	if err != nil {
		return err
	}
	m := g.NewMatcher(false)
	mask := NewBitmask(c.vocab.Size())
	for i := 0; i < len(warmText); i++ {
		m.Mask(mask)
		set, done, ok := m.feed([]byte{warmText[i]})
		if !ok {
			return fmt.Errorf("guide: warm-up text rejected at %d", i)
		}
		m.commit(set, done, false)
	}
	return nil
}
