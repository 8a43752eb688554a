package sched

import (
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/ipc"
)

// Guide compiles structured-output constraints (SamplingParams.Constraint)
// into per-request matchers. engine-core/guide provides the machinery; an
// adapter in the engine's wiring implements this interface with it.
type Guide interface {
	// NewMatcher returns a matcher for c; an error refuses the request at
	// Add (it is reported with FinishError).
	NewMatcher(c *ipc.Constraint) (Matcher, error)
}

// Matcher follows one request's output through its constraint.
type Matcher interface {
	// Mask returns the tokens allowed next. The scheduler puts it in the
	// request's sample.Input when the step samples; it must stay valid
	// until the next Accept.
	Mask() sample.Mask
	// Accept advances past tok; an error means tok broke the constraint
	// (the request then ends with FinishError).
	Accept(tok int32) error
	// IsDone reports that the constraint is complete and admits nothing
	// more; the request then ends with FinishStop.
	IsDone() bool
}
