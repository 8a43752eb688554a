package toolparse

// This file holds the machinery the machine's argument steps share: the
// streamed JSON-arguments value (opArgs: deepseek, mistral), the open/close
// of arguments built from other syntaxes (pythonic, qwen3_coder), and the
// uncommitted-region rules.

// argStep is what jsonArgs.step reports to the family parser.
type argStep uint8

const (
	argWait   argStep = iota // more text needed; return to the caller
	argBroken                // malformed before the call was committed
	argFault                 // malformed after the call was committed
	argDone                  // the arguments value is complete
)

// jsonArgs streams one call's JSON arguments value: it commits the call
// once the value is complete or commitAfter bytes scanned as valid JSON,
// then sends each newly scanned fragment as an argument delta.
type jsonArgs struct {
	scan    jsonScanner
	name    string // the call's function
	at      int    // where the arguments start
	emitted int    // arguments sent up to here
	open    bool   // the call was committed
	started bool   // the leading whitespace was skipped
}

// begin readies a for the arguments of the call named name.
func (a *jsonArgs) begin(name string) {
	a.name, a.started = name, false
}

// step skips the whitespace before the value, then scans the text added
// since the last step. At the end of output (final) inside an uncommitted
// call, the markup's raw text is content (base.truncated).
func (a *jsonArgs) step(b *base, final bool) argStep {
	if !a.started {
		if !b.skipWS() {
			b.truncated(final)
			return argWait
		}
		a.at, a.emitted, a.open, a.started = b.pos, b.pos, false, true
		a.scan.reset()
	}
	n, res := a.scan.feed(b.buf[b.pos:])
	b.pos += n
	if !a.open && (res == scanDone || b.pos-a.at >= commitAfter) {
		b.beginCall(a.name)
		a.open = true
	}
	if !a.open {
		if res == scanErr {
			return argBroken
		}
		b.truncated(final)
		return argWait
	}
	b.streamArgs(&a.emitted)
	switch res {
	case scanMore:
		return argWait
	case scanErr:
		return argFault
	}
	return argDone
}

// streamArgs sends the arguments scanned since *emitted, verbatim, and
// moves *emitted to the cursor.
func (b *base) streamArgs(emitted *int) {
	if b.pos > *emitted {
		b.addArgs(b.str(*emitted, b.pos))
		*emitted = b.pos
	}
}

// truncated handles the end of output inside uncommitted markup: its raw
// text, from region on, is content.
func (b *base) truncated(final bool) {
	if final {
		b.emitContent(b.region, len(b.buf))
		b.pos = len(b.buf)
	}
}

// openArgs sends a built arguments object's '{'.
func (b *base) openArgs() {
	b.addArgs("{")
	b.argsOpen = true
}

// closeArgs sends the '}' of a built arguments object still open.
func (b *base) closeArgs() {
	if b.argsOpen {
		b.addArgs("}")
		b.argsOpen = false
	}
}

// finishCall closes a committed call cut off by the end of output.
func (b *base) finishCall(final bool) {
	if final {
		b.closeArgs()
		b.pos = len(b.buf)
	}
}
