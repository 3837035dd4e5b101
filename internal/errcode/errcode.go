// Package errcode is mosaic's one registry of error codes: every code a user
// can meet (the JSON error code, and what docs/exit-codes.md names) is declared here
// once, with its exit class and a one-line meaning. It is a leaf: every other
// package may import it, and it imports nothing of mosaic's.
//
// An error a user can act on is made from its code, e.g.
//
//	errcode.BadName.New("session name %q is too long", name)
//
// so a code's exit class cannot differ from one call site to the next.
package errcode

import (
	"errors"
	"fmt"
	"sort"
)

// Exit codes of the mosaic command, shared by every verb.
const (
	ExitFailure  = 1 // something went wrong that is not the caller's input
	ExitBadInput = 2 // bad input or usage: nothing was changed
	ExitRefused  = 3 // a refusal: the request was understood and declined
)

// Code is one registered error code.
type Code struct {
	Name    string // stable, kebab-case
	Exit    int    // ExitFailure, ExitBadInput or ExitRefused
	Meaning string // one line, for docs/exit-codes.md and `mosaic help`
}

var registry = map[string]Code{}

func def(name string, exit int, meaning string) Code {
	if _, dup := registry[name]; dup {
		panic("errcode: " + name + " declared twice")
	}
	c := Code{Name: name, Exit: exit, Meaning: meaning}
	registry[name] = c
	return c
}

// New makes an error of this code with a one-line message that says what to
// do next. The format is fmt.Errorf's: an error given with %w is kept as
// the cause (errors.Is and errors.As see it through Unwrap), its text in
// the message. With more than one %w, the causes are kept together: errors.Is
// and errors.As see each of them.
func (c Code) New(format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	cause := errors.Unwrap(err)
	if _, many := err.(interface{ Unwrap() []error }); many {
		cause = err
	}
	return &Error{Code: c.Name, Message: err.Error(), Exit: c.Exit, cause: cause}
}

// Wrap makes an error of this code whose cause is err, with a message
// that says in its own words what err means (err's text is not in it).
func (c Code) Wrap(err error, format string, args ...any) *Error {
	return &Error{Code: c.Name, Message: fmt.Sprintf(format, args...), Exit: c.Exit, cause: err}
}

// Error is an error a user can act on: a registered code, a one-line message
// and the exit code the code maps to; and what caused it, when the message
// was made from another error (%w).
type Error struct {
	Code    string
	Message string
	Exit    int
	cause   error
}

func (e *Error) Error() string { return e.Message }

// Unwrap is the error this one was made from (with %w), or nil.
func (e *Error) Unwrap() error { return e.cause }

// Is lets errors.Is match an error against a Code: errors.Is(err, errcode.NoSuchSession).
func (e *Error) Is(target error) bool {
	t, ok := target.(codeTarget)
	return ok && t.name == e.Code
}

type codeTarget struct{ name string }

func (t codeTarget) Error() string { return t.name }

// Target is what errors.Is compares with: errors.Is(err, errcode.NoSuchSession.Target()).
func (c Code) Target() error { return codeTarget{c.Name} }

// Of returns err as an *Error; an error that is not one is Unexpected.
// An *Error made from another (%w) is found before its cause (errors.As
// looks at err, then at what it wraps, depth first): the outermost code is
// the one a user sees, never the code of a cause below it.
func Of(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Unexpected.New("%s", err.Error())
}

// Lookup returns the registered code of that name.
func Lookup(name string) (Code, bool) {
	c, ok := registry[name]
	return c, ok
}

// All returns every registered code, sorted by name.
func All() []Code {
	out := make([]Code, 0, len(registry))
	for _, c := range registry {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
