package units

import "fmt"

// Exit codes of the mosaic command, shared by every verb.
const (
	ExitFailure  = 1 // something went wrong that is not the caller's input
	ExitBadInput = 2 // bad input or usage: nothing was changed
	ExitRefused  = 3 // a refusal: the request was understood and declined
)

// Error is an error a user can act on: a stable kebab-case code (the JSON
// error code, and what the docs name), a one-line message that says what to do,
// and the exit code it maps to.
type Error struct {
	Code    string
	Message string
	Exit    int
}

func (e *Error) Error() string { return e.Message }

// BadInput is an error in the caller's input (exit 2).
func BadInput(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Exit: ExitBadInput}
}

// Refused is a refusal (exit 3).
func Refused(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Exit: ExitRefused}
}

// Failed is a failure that is neither bad input nor a refusal (exit 1).
func Failed(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Exit: ExitFailure}
}
