package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Error is an API error: the HTTP status and the OpenAI error body
// {"error": {"message", "type", "param", "code"}}.
type Error struct {
	Status  int    // HTTP status
	Message string // human-readable text
	Type    string // BadRequestError, NotFoundError, …
	Param   string // offending request field; "" is written as null
}

// Error implements error.
func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%s (param %s): %s", e.Type, e.Param, e.Message)
	}
	return e.Type + ": " + e.Message
}

// BadRequest returns a 400 naming param.
func BadRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "BadRequestError", Param: param, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns a 404 naming param.
func NotFound(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Type: "NotFoundError", Param: param, Message: fmt.Sprintf(format, args...)}
}

// NewError returns an error of any status; its type is derived from it.
func NewError(status int, format string, args ...any) *Error {
	return &Error{Status: status, Type: TypeForStatus(status), Message: fmt.Sprintf(format, args...)}
}

// TypeForStatus names the error type OpenAI clients expect for status.
func TypeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusUnauthorized:
		return "AuthenticationError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusRequestEntityTooLarge:
		return "RequestTooLargeError"
	case http.StatusTooManyRequests:
		return "RateLimitError"
	case http.StatusNotImplemented:
		return "NotImplementedError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	}
	return "InternalServerError"
}

// AppendJSON appends the error body {"error":{…}} to dst.
func (e *Error) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = AppendString(dst, e.Message)
	dst = append(dst, `,"type":`...)
	dst = AppendString(dst, e.Type)
	dst = append(dst, `,"param":`...)
	if e.Param == "" {
		dst = append(dst, "null"...)
	} else {
		dst = AppendString(dst, e.Param)
	}
	dst = append(dst, `,"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Status), 10)
	return append(dst, "}}"...)
}

// MarshalJSON renders the error body.
func (e *Error) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil), nil }

var _ json.Marshaler = (*Error)(nil)
