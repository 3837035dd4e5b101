package manager

import (
	"context"
	"fmt"
	"io"
	"time"
)

// A tracer writes where the time of one command goes, step by step
// (MOSAIC_TRACE=1): the data to choose the next speed-up from.
type tracer struct {
	w        io.Writer
	last     time.Time
	messages bool // also a line per D-Bus message (MOSAIC_TRACE=dbus)
}

type traceKey struct{}

// WithTrace returns a context under which each step of a start or a run
// writes its duration to w, and the connection made under it its count of
// D-Bus messages when it closes; with messages, also a line per message.
func WithTrace(ctx context.Context, w io.Writer, messages bool) context.Context {
	return context.WithValue(ctx, traceKey{}, &tracer{w: w, last: time.Now(), messages: messages})
}

// mark records the end of a step.
func mark(ctx context.Context, step string) {
	t, ok := ctx.Value(traceKey{}).(*tracer)
	if !ok {
		return
	}
	now := time.Now()
	fmt.Fprintf(t.w, "mosaic trace: %-22s %8.3f ms\n", step, float64(now.Sub(t.last).Microseconds())/1000)
	t.last = now
}

type startedKey struct{}

// WithStarted returns a context under which fn is called once a session's
// command runs (its start job is done, or its scope's shim was let go): a
// foreground run on a pseudo-terminal relays the user's keys only then, so
// that a Ctrl-C typed while the session starts reaches the command.
func WithStarted(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, startedKey{}, fn)
}

// started calls the function WithStarted gave, if any.
func started(ctx context.Context) {
	if fn, ok := ctx.Value(startedKey{}).(func()); ok {
		fn()
	}
}
