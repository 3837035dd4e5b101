package manager

import (
	"fmt"
	"io"
	"sort"
	"sync/atomic"

	"github.com/godbus/dbus/v5"
)

// Messages counts the D-Bus messages one connection sent and received, by
// kind: what a start costs the bus (issue 32), read by MOSAIC_TRACE=1 and
// mosaic-bench. Auth is no message; Hello is a call.
type Messages struct {
	Calls   int64 `json:"calls"`    // method calls sent that wait for an answer
	NoReply int64 `json:"no_reply"` // method calls sent without one (AddMatch, Subscribe)
	Replies int64 `json:"replies"`  // answers received: method returns and errors
	Signals int64 `json:"signals"`  // signals received
}

// messageCounter counts one connection's messages as godbus hands them to
// its interceptors; with list set it also names each (MOSAIC_TRACE=dbus).
type messageCounter struct {
	calls, noReply, replies, signals atomic.Int64
	list                             io.Writer
}

// options are the dial options that count (and maybe name) every message.
func (c *messageCounter) options() []dbus.ConnOption {
	return []dbus.ConnOption{
		dbus.WithOutgoingInterceptor(func(msg *dbus.Message) {
			if msg.Type != dbus.TypeMethodCall {
				return
			}
			if msg.Flags&dbus.FlagNoReplyExpected != 0 {
				c.noReply.Add(1)
			} else {
				c.calls.Add(1)
			}
			c.name(">", msg)
		}),
		dbus.WithIncomingInterceptor(func(msg *dbus.Message) {
			switch msg.Type {
			case dbus.TypeMethodReply, dbus.TypeError:
				c.replies.Add(1)
			case dbus.TypeSignal:
				c.signals.Add(1)
			}
			c.name("<", msg)
		}),
	}
}

// name writes one line per message to list, when set.
func (c *messageCounter) name(dir string, msg *dbus.Message) {
	if c.list == nil {
		return
	}
	member, _ := msg.Headers[dbus.FieldMember].Value().(string)
	path, _ := msg.Headers[dbus.FieldPath].Value().(dbus.ObjectPath)
	what := ""
	if member == "PropertiesChanged" && len(msg.Body) >= 2 { // the interface and the names that changed
		changed, _ := msg.Body[1].(map[string]dbus.Variant)
		names := make([]string, 0, len(changed))
		for k := range changed {
			names = append(names, k)
		}
		sort.Strings(names)
		what = fmt.Sprint(" ", msg.Body[0], " ", names)
	}
	fmt.Fprintf(c.list, "mosaic dbus: %s %s %s %s%s\n", dir, msg.Type, member, path, what)
}

// count is what was counted so far.
func (c *messageCounter) count() Messages {
	return Messages{Calls: c.calls.Load(), NoReply: c.noReply.Load(), Replies: c.replies.Load(), Signals: c.signals.Load()}
}

// Messages are the D-Bus messages this connection sent and received so far.
func (m *Manager) Messages() Messages {
	if m.counter == nil {
		return Messages{}
	}
	return m.counter.count()
}

// String is the line MOSAIC_TRACE=1 ends a command with.
func (n Messages) String() string {
	return fmt.Sprintf("%d calls, %d sent without reply, %d replies, %d signals", n.Calls, n.NoReply, n.Replies, n.Signals)
}
