package anthropic

import (
	"net/http"

	"github.com/sluice-llm/sluice/api-frontend/openai"
)

// ErrorType is Anthropic's error type for an HTTP status.
func ErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// AppendError appends e as Anthropic's error JSON:
// {"type":"error","error":{"type":…,"message":…}}.
func AppendError(dst []byte, e *openai.Error) []byte {
	dst = append(dst, `{"type":"error","error":{"type":`...)
	dst = openai.AppendString(dst, ErrorType(e.Status))
	dst = append(dst, `,"message":`...)
	dst = openai.AppendString(dst, e.Message)
	return append(dst, "}}"...)
}
