package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"

	"mosaic/internal/errcode"
	"mosaic/manager"
)

// mosaic approve --notify tells the user of each connection a session
// holds for an answer with a desktop notification (the freedesktop
// Notifications service on the session bus, which every graphical session
// runs), whose buttons answer it: Allow, Once, Deny. It runs in the user's
// graphical session, not in a session's: the notification server is the
// user's. What the notification shows is mosaic's: the session's name and
// the held host:port, both validated names, and escaped again for the
// server's markup (a server may read <b>, <a href>).

// The freedesktop Notifications service.
const (
	notifyName  = "org.freedesktop.Notifications"
	notifyPath  = "/org/freedesktop/Notifications"
	notifyIface = "org.freedesktop.Notifications"
)

// notifyActions are the notification's buttons: key, label, pairwise; a
// key is an answer approve takes.
var notifyActions = []string{"a", "Allow for the session", "o", "Once", "d", "Deny"}

// notifyHeld shows each held connection of every running session as a
// desktop notification and answers it as its button says, until ctx
// ends; w gets a line for each.
func notifyHeld(ctx context.Context, m *manager.Manager, w io.Writer) error {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		return errcode.NoNotifications.New("no session bus to show desktop notifications on (%w): run mosaic approve --notify in your graphical session", err)
	}
	defer conn.Close()
	obj := conn.Object(notifyName, notifyPath)
	if err := obj.CallWithContext(ctx, notifyIface+".GetServerInformation", 0).Err; err != nil {
		return errcode.NoNotifications.New("no desktop notification service answers on the session bus (%w): run mosaic approve --notify in your graphical session, or mosaic approve on a terminal", err)
	}
	// A button's signal counts only from the service itself: any client
	// of the session bus can send one (to approve's name, past any match
	// rule), and it would answer as the user.
	var server string
	if err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.GetNameOwner", 0, notifyName).Store(&server); err != nil {
		return errcode.NoNotifications.New("no desktop notification service owns %s on the session bus (%w)", notifyName, err)
	}
	if err := conn.AddMatchSignal(dbus.WithMatchSender(notifyName), dbus.WithMatchObjectPath(notifyPath), dbus.WithMatchInterface(notifyIface)); err != nil {
		return errcode.Unexpected.New("cannot listen to the notification service: %w", err)
	}
	if err := conn.AddMatchSignal(dbus.WithMatchSender(busName), dbus.WithMatchMember("NameOwnerChanged"), dbus.WithMatchArg(0, notifyName)); err != nil {
		return errcode.Unexpected.New("cannot listen to the notification service: %w", err)
	}
	signals := make(chan *dbus.Signal, 32)
	conn.Signal(signals)
	fmt.Fprintln(w, "mosaic approve: showing sessions' held connections as desktop notifications (Ctrl-C to end)")
	shown := map[uint32]heldRequest{}
	asked := map[string]bool{}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-signals:
			if owner, ok := newNotifyOwner(s); ok {
				// Another service now (the desktop's restarted): its ids
				// are its own, and what is held is shown there anew.
				server = owner
				clear(shown)
				clear(asked)
			} else if s.Sender == server {
				answerNotification(s, shown, w)
			}
		case <-tick.C:
			held, err := heldRequests(ctx, m)
			if err != nil {
				return err
			}
			now := map[string]bool{}
			for _, h := range held {
				k := heldKey(h)
				now[k] = true
				if asked[k] {
					continue
				}
				var id uint32
				if err := obj.CallWithContext(ctx, notifyIface+".Notify", 0, "mosaic", uint32(0), "", notifySummary(h), notifyBody(h),
					notifyActions, map[string]dbus.Variant{"urgency": dbus.MakeVariant(byte(1))}, int32(30000)).Store(&id); err != nil {
					fmt.Fprintf(w, "cannot show %s's held connection to %s: %v\n", h.Session, h.Target, err)
					continue
				}
				asked[k], shown[id] = true, h
			}
			for k := range asked { // held again later (after a once): shown again
				if !now[k] {
					delete(asked, k)
				}
			}
		}
	}
}

// busName is the bus itself, the one sender of NameOwnerChanged (no
// client can send as it).
const busName = "org.freedesktop.DBus"

// newNotifyOwner reads s as the notification service's new owner on the
// bus ("" for none).
func newNotifyOwner(s *dbus.Signal) (string, bool) {
	if s.Sender != busName || s.Name != busName+".NameOwnerChanged" || len(s.Body) != 3 {
		return "", false
	}
	name, _ := s.Body[0].(string)
	owner, ok := s.Body[2].(string)
	return owner, ok && name == notifyName
}

// heldKey names one hold of a connection: its session, its target and
// when it began (a hold of the same target after an answer is another).
func heldKey(h heldRequest) string {
	return h.Session + " " + h.Target + " " + h.Since.String()
}

// answerNotification answers the held connection of a notification whose
// button was pressed (ActionInvoked), and forgets one that closed.
func answerNotification(s *dbus.Signal, shown map[uint32]heldRequest, w io.Writer) {
	if len(s.Body) < 2 {
		return
	}
	id, _ := s.Body[0].(uint32)
	h, ok := shown[id]
	if !ok {
		return
	}
	switch s.Name {
	case notifyIface + ".NotificationClosed":
		delete(shown, id)
	case notifyIface + ".ActionInvoked":
		key, _ := s.Body[1].(string)
		said, ok := heldAnswers[key]
		if !ok {
			return
		}
		delete(shown, id)
		if err := answerHeld(h, key); err != nil {
			fmt.Fprintf(w, "%s wants %s: not answered: %v\n", h.Session, h.Target, err)
			return
		}
		fmt.Fprintf(w, "%s wants %s: %s\n", h.Session, h.Target, said)
	}
}

// notifySummary is a held connection's notification title.
func notifySummary(h heldRequest) string {
	return markupEscape("mosaic: session " + h.Session + " wants " + h.Target)
}

// notifyBody is its text.
func notifyBody(h heldRequest) string {
	return markupEscape("Allow it for the session, let this connection through once, or deny it. Unanswered, it is refused when its hold ends.")
}

// markupEscape escapes the characters a notification server's markup
// reads.
func markupEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&#39;", "\"", "&quot;").Replace(s)
}
