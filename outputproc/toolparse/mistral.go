package toolparse

import "bytes"

// mistral parses Mistral tool calls in both tokenizer generations:
// [TOOL_CALLS][{"name": …, "arguments": {…}}, …] (JSON array) and
// [TOOL_CALLS]name[ARGS]{…} (also name[CALL_ID]id[ARGS]{…} and
// name{…}), each call with its own [TOOL_CALLS].
type mistral struct {
	base
	st       uint8
	args     jsonArgs
	w        objWalker
	nameAt   int // start of the function name (name form)
	arrCalls int // calls read from the current array
}

const (
	mistralTag  = "[TOOL_CALLS]"
	mistralArgs = "[ARGS]"
	mistralID   = "[CALL_ID]"
	maxNameLen  = 256
)

const (
	mProse    = iota
	mAfterTag // after [TOOL_CALLS]: '[' (array form) or a name
	mElem     // in the array: expect an object or ']'
	mObj      // an array element
	mArrNext  // after an element: ',' or ']'
	mName     // reading name up to [ARGS], [CALL_ID] or '{'
	mCallID   // skipping a call id up to [ARGS]
	mArgs     // streaming the arguments value
)

func (p *mistral) run(final bool) {
	for {
		switch p.st {
		case mProse:
			if !p.skipCallWS() {
				return
			}
			i := bytes.Index(p.buf[p.pos:], []byte(mistralTag))
			if i < 0 {
				p.emitHeld(final, mistralTag)
				return
			}
			p.emitContent(p.pos, p.pos+i)
			p.region = p.pos + i
			p.pos = p.region + len(mistralTag)
			p.arrCalls = 0
			p.st = mAfterTag
		case mAfterTag:
			if !p.skipWS() {
				p.truncated(final)
				return
			}
			if p.buf[p.pos] == '[' {
				p.pos++
				p.st = mElem
				continue
			}
			p.nameAt = p.pos
			p.st = mName
		case mElem:
			if !p.skipWS() {
				p.truncated(final)
				return
			}
			if p.buf[p.pos] == ']' {
				p.pos++
				if p.arrCalls == 0 {
					// An empty list is not a call: keep it as text.
					p.broken(false)
					continue
				}
				p.afterCall = true
				p.st = mProse
				continue
			}
			p.w.reset(false)
			p.st = mObj
		case mObj:
			switch p.w.step(&p.base) {
			case walkMore:
				if !p.w.committed {
					p.truncated(final)
				}
				return
			case walkDone:
				p.arrCalls++
				p.region = p.pos // a later fault keeps earlier calls
				p.st = mArrNext
			case walkBroken:
				p.broken(p.w.committed)
			}
		case mArrNext:
			if !p.skipWS() {
				return
			}
			switch p.buf[p.pos] {
			case ',':
				p.pos++
				p.st = mElem
			case ']':
				p.pos++
				p.afterCall = true
				p.st = mProse
			default:
				p.broken(true)
			}
		case mName:
			rest := p.buf[p.pos:]
			i := bytes.IndexAny(rest, "[{")
			if i < 0 {
				if len(rest) > maxNameLen || bytes.ContainsAny(rest, " \n\t\"") {
					p.broken(false)
					continue
				}
				p.truncated(final)
				return
			}
			name := string(bytes.TrimSpace(p.buf[p.nameAt : p.pos+i]))
			if !p.tools.known(name) || bytes.ContainsAny(p.buf[p.nameAt:p.pos+i], "\"") {
				p.pos += i
				p.broken(false)
				continue
			}
			p.pos += i
			if p.buf[p.pos] == '[' {
				switch p.match(mistralArgs) {
				case needMore:
					p.truncated(final)
					return
				case noMatch:
					switch p.match(mistralID) {
					case needMore:
						p.truncated(final)
						return
					case noMatch:
						p.broken(false)
						continue
					}
					p.st = mCallID
					continue
				}
			}
			p.commitName(name)
		case mCallID:
			i := bytes.Index(p.buf[p.pos:], []byte(mistralArgs))
			if i+len(mistralArgs)-1 > maxNameLen {
				i = -1 // as when streamed in pieces
			}
			if i < 0 {
				if len(p.buf)-p.pos > maxNameLen {
					p.broken(false)
					continue
				}
				p.truncated(final)
				return
			}
			name := string(bytes.TrimSpace(p.buf[p.nameAt : bytes.IndexByte(p.buf[p.nameAt:], '[')+p.nameAt]))
			p.pos += i + len(mistralArgs)
			p.commitName(name)
		case mArgs:
			switch p.args.step(&p.base, final) {
			case argWait:
				return
			case argBroken:
				p.broken(false)
				continue
			case argFault:
				p.st = mProse
				continue
			}
			p.afterCall = true
			p.st = mProse
		}
	}
}

// commitName records the call's name; the call is committed once its
// arguments start well (see commitAfter).
func (p *mistral) commitName(name string) {
	p.args.begin(name)
	p.st = mArgs
}

// broken returns malformed markup to prose: uncommitted markup is content;
// after a commit, the text from the fault on is prose.
func (p *mistral) broken(committed bool) {
	if !committed {
		p.emitContent(p.region, p.pos)
	}
	p.st = mProse
}
