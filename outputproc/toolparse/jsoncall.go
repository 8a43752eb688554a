package toolparse

import "encoding/json"

// objWalker reads one call object {"name": …, "arguments": …} at the
// cursor. It commits the call (sends its first delta) as soon as the name is
// known and the first commitAfter bytes of the arguments are valid JSON (or
// the arguments are complete), and streams the arguments verbatim as they
// are scanned. If "arguments" comes before "name", the arguments
// are held until the name arrives. Other keys are skipped.
type objWalker struct {
	st        uint8
	scan      jsonScanner
	first     bool   // no key read yet
	key       string // the current key
	valStart  int    // where the current key or value starts
	name      string
	hasName   bool
	argStart  int // held arguments (when they came before the name)
	argEnd    int
	hasArgs   bool
	committed bool // the call's first delta was sent
	streaming bool // the current value is the arguments, streamed once committed
	emitted   int  // arguments sent up to here
	strict    bool // any key but the known ones breaks the call (bare JSON formats)
}

// Walker states.
const (
	wOpen = iota
	wKey
	wKeyScan
	wColon
	wValue
	wValScan
	wAfter
)

// Results of objWalker.step.
const (
	walkMore   = iota // need more text
	walkDone          // the object closed; the cursor is after '}'
	walkBroken        // the object is not a call; the cursor is at the fault
)

func (w *objWalker) reset(strict bool) {
	*w = objWalker{scan: w.scan, strict: strict, first: true}
	w.scan.reset()
}

func isArgsKey(k string) bool { return k == "arguments" || k == "parameters" }

// step advances through the object as far as the text allows.
func (w *objWalker) step(b *base) int {
	for {
		switch w.st {
		case wOpen:
			if !b.skipWS() {
				return walkMore
			}
			if b.buf[b.pos] != '{' {
				return walkBroken
			}
			b.pos++
			w.st = wKey
		case wKey:
			if !b.skipWS() {
				return walkMore
			}
			switch c := b.buf[b.pos]; {
			case c == '"':
				w.valStart = b.pos
				w.scan.reset()
				w.st = wKeyScan
			case c == '}' && w.first:
				b.pos++
				return w.end(b)
			default:
				return walkBroken
			}
		case wKeyScan:
			n, res := w.scan.feed(b.buf[b.pos:])
			b.pos += n
			switch res {
			case scanMore:
				return walkMore
			case scanErr:
				return walkBroken
			}
			w.first = false
			if json.Unmarshal(b.buf[w.valStart:b.pos], &w.key) != nil {
				return walkBroken
			}
			if w.strict && w.key != "name" && !isArgsKey(w.key) && w.key != "type" && w.key != "id" {
				return walkBroken
			}
			w.st = wColon
		case wColon:
			if !b.skipWS() {
				return walkMore
			}
			if b.buf[b.pos] != ':' {
				return walkBroken
			}
			b.pos++
			w.st = wValue
		case wValue:
			if !b.skipWS() {
				return walkMore
			}
			w.valStart = b.pos
			w.scan.reset()
			if isArgsKey(w.key) && w.hasName && !w.committed {
				w.streaming, w.emitted = true, b.pos
			}
			w.st = wValScan
		case wValScan:
			n, res := w.scan.feed(b.buf[b.pos:])
			b.pos += n
			if w.streaming && !w.committed && (res == scanDone || b.pos-w.valStart >= commitAfter) {
				b.beginCall(w.name)
				w.committed = true
			}
			if w.committed && w.streaming {
				b.streamArgs(&w.emitted)
			}
			switch res {
			case scanMore:
				return walkMore
			case scanErr:
				return walkBroken
			}
			if !w.value(b) {
				return walkBroken
			}
			w.st = wAfter
		case wAfter:
			if !b.skipWS() {
				return walkMore
			}
			switch b.buf[b.pos] {
			case ',':
				b.pos++
				w.st = wKey
			case '}':
				b.pos++
				return w.end(b)
			default:
				return walkBroken
			}
		}
	}
}

// value handles a complete value; false when it breaks the call.
func (w *objWalker) value(b *base) bool {
	switch {
	case w.streaming:
		w.streaming, w.hasArgs = false, true
	case w.key == "name" && !w.hasName:
		if json.Unmarshal(b.buf[w.valStart:b.pos], &w.name) != nil || !b.tools.known(w.name) {
			return false
		}
		w.hasName = true
		if w.hasArgs {
			b.beginCall(w.name)
			b.addArgs(string(b.buf[w.argStart:w.argEnd]))
			w.committed = true
		}
	case isArgsKey(w.key) && !w.hasArgs:
		w.argStart, w.argEnd, w.hasArgs = w.valStart, b.pos, true
	}
	return true
}

// end handles the closing '}': a call without arguments gets "{}", and an
// object without a name is not a call.
func (w *objWalker) end(b *base) int {
	if w.committed {
		return walkDone
	}
	if !w.hasName {
		return walkBroken
	}
	b.beginCall(w.name)
	b.addArgs("{}")
	w.committed = true
	return walkDone
}
