package toolparse

// hermesSpec parses <tool_call>{"name": …, "arguments": {…}}</tool_call>, as
// Hermes and Qwen2.5/Qwen3 models write it.
var hermesSpec = spec{
	start: hProse, bad: hRawBefore, fault: hRawAfter,
	states: []state{
		hProse:     {op: opProse, tags: []string{hermesOpen}, tos: []uint8{hObj}},
		hObj:       {op: opObj, to: hClose},
		hClose:     {op: opClose, tags: []string{hermesClose}, to: hProse, after: setAfter},
		hRawBefore: {op: opRaw, tags: []string{hermesClose}, keep: true, to: hProse, after: clearAfter},
		hRawAfter:  {op: opRaw, tags: []string{hermesClose}, to: hProse, after: setAfter},
	},
}

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
)

const (
	hProse     = iota
	hObj       // inside the tag: the call object
	hClose     // after the object: expect </tool_call>
	hRawBefore // malformed, uncommitted: raw text up to and including </tool_call>
	hRawAfter  // malformed after commit: raw text up to </tool_call>
)
