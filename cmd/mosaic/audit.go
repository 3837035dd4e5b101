package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"mosaic/manager"
	"mosaic/manager/audit"
	"mosaic/manager/records"
)

// auditCommand is mosaic audit NAME: what a session did, in one
// time-ordered record (manager/audit).
func auditCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "audit",
		Usage:     "show what a session did, in time order: start, egress refusals and connections, grants, launches, its change, its end",
		ArgsUsage: "NAME",
		Description: "Reads the session's records and the user's journal: each event but start, change and end is a journal entry\n" +
			"with a MESSAGE_ID of its own (journalctl --user -x explains it), trusted only from the unit that writes its kind.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new events; return when the session ends"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON object per event and line, with stable field names and an id"},
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, err := oneName(c)
			if err != nil {
				return err
			}
			out.json = c.Bool("json")
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				s, err := m.Status(ctx, name)
				if err != nil {
					return err
				}
				p, err := out.userPaths()
				if err != nil {
					return err
				}
				return printAudit(ctx, m, out, p.SessionDir(name), s, c.Bool("follow"))
			})
		},
	}
}

// printAudit prints session s's audit from its state directory dir and
// the journal; following, it keeps reading the journal until s ends.
func printAudit(ctx context.Context, m *manager.Manager, out *output, dir string, s manager.Session, follow bool) error {
	rec, ok := records.Read(dir)
	if !ok {
		return fmt.Errorf("session %s has no record to audit", s.Name)
	}
	fromRecords := func() []audit.Event {
		var end *records.End
		if e, ok := records.ReadEnd(dir); ok && !e.Ended.Before(rec.Started) {
			end = &e
		}
		cl, _ := records.ReadClone(dir)
		return audit.FromRecords(rec, end, cl)
	}
	events, cursor, err := audit.Journal(ctx, s.Name, rec.Started, "")
	if err != nil {
		return err
	}
	if !follow || !s.Running() {
		printEvents(out, audit.Merge(append(fromRecords(), events...)))
		return nil
	}
	printEvents(out, audit.Merge(append(fromRecords()[:1], events...)))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
		running := true
		if st, err := m.Status(ctx, s.Name); err == nil {
			running = st.Running()
		}
		events, cursor, err = audit.Journal(ctx, s.Name, rec.Started, cursor)
		if err != nil {
			return err
		}
		if !running {
			printEvents(out, audit.Merge(append(events, fromRecords()[1:]...)))
			return nil
		}
		printEvents(out, events)
	}
}

// printEvents prints events: a line each, or a JSON object each.
func printEvents(out *output, events []audit.Event) {
	for _, e := range events {
		if out.json {
			b, _ := json.Marshal(e)
			fmt.Fprintf(out.stdout, "%s\n", b)
			continue
		}
		io.WriteString(out.stdout, out.safe(fmt.Sprintf("%s  %-18s %s", e.Time.Local().Format("2006-01-02 15:04:05"), e.Event, e.Message))+"\n")
	}
}
