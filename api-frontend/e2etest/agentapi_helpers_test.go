package e2etest

import (
	"errors"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// asAnthropicError unwraps the SDK's API error.
func asAnthropicError(err error, target **anthropic.Error) bool {
	return errors.As(err, target)
}
