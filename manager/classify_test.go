package manager

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/godbus/dbus/v5"

	"mosaic/internal/errcode"
)

// systemdError gives each kind of systemd's answer its code, and keeps
// the answer as the cause.
func TestSystemdErrorClassifies(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("call: %w", context.DeadlineExceeded), "systemd-timeout"},
		{dbus.ErrClosed, "systemd-gone"},
		{dbus.Error{Name: errNoSuchUnit, Body: []any{"no such unit"}}, "no-such-session"},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.AccessDenied"}, "systemd-error"},
	} {
		err := systemdError("X", tc.err)
		if got := errcode.Of(err).Code; got != tc.code {
			t.Errorf("systemdError(%v) = %s, want %s", tc.err, got, tc.code)
		}
		if !reflect.DeepEqual(errors.Unwrap(err), tc.err) {
			t.Errorf("systemdError(%v) lost its cause", tc.err)
		}
	}
}
