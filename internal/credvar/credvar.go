// Package credvar is one credential as mosaic carries it: a variable's name
// and its secret value, which no String shows, and the check of a name. A
// leaf, so that the egress proxy (which injects credentials) and the
// credential store share it without the sandbox importing the store.
package credvar

import (
	"strings"

	"mosaic/internal/errcode"
)

// Var is one credential: a variable name and its secret value. Its String
// never shows the value, so that a stray %v cannot print a secret.
type Var struct {
	Name  string
	Value string
}

func (v Var) String() string { return v.Name + "=<redacted>" }

// GoString keeps %#v from printing the value too.
func (v Var) GoString() string { return v.String() }

// IsName reports whether name is a variable name: [A-Za-z_][A-Za-z0-9_]*.
// A loop, not a regexp: compiling one ran at every start of the binary
// (three per session), and nothing else in mosaic needs the regexp package.
func IsName(name string) bool {
	for i, c := range []byte(name) {
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return name != ""
}

// reserved are the variables mosaic's init sets or systemd uses itself; a
// credential of that name would be overwritten or would break the session.
var reserved = map[string]bool{"HOME": true, "TMPDIR": true, "PATH": true, "USER": true, "LOGNAME": true, "NOTIFY_SOCKET": true}

// ValidateName checks a credential's name.
func ValidateName(name string) error {
	if !IsName(name) {
		return errcode.CredentialInvalid.New("credential name %q is invalid: use letters, digits and _, not starting with a digit", name)
	}
	if reserved[name] || strings.HasPrefix(name, "MOSAIC_") {
		return errcode.CredentialInvalid.New("credential name %s is set by mosaic itself: pass the secret under another name", name)
	}
	return nil
}
