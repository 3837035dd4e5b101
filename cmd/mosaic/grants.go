package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"mosaic/internal/acceptloop"
	"mosaic/internal/errcode"
	"mosaic/manager"
	"mosaic/manager/request"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// allowCommand and denyCommand change a running session's allowlist
// through its egress proxy's control socket, which only the user's own
// processes outside every session reach (sandbox/egress/control.go).
func allowCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "allow",
		Usage:     "let a running session reach more hosts, at once, without a restart (any session but --network none or host)",
		ArgsUsage: "NAME HOST[:PORT]|@GROUP[:write]|ADDRESS...",
		Description: "Adds each entry to the session's allowlist in its egress proxy: a host name (port 443 unless given), a group\n" +
			"(`mosaic profiles` lists them) or an address or prefix an allowed name may resolve to. With --for the grant ends\n" +
			"by itself. Each grant is one line in the proxy's journal (`mosaic logs NAME --egress`) and shows in `mosaic status`.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "for", Usage: "end the grant after `DURATION` (90s, 10min, 2h; default: when the session ends)"},
			&cli.BoolFlag{Name: "once", Usage: "let only the connections the session holds now for HOST go on (a session started with --ask), granting nothing"},
			jsonFlag,
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, entries, err := nameAndEntries(c)
			if err != nil {
				return err
			}
			if pol, err := request.ReadPolicy(); err != nil {
				return err
			} else if err := pol.CheckGrant(entries); err != nil {
				return err
			}
			if c.Bool("once") {
				return allowOnce(out, name, entries, c.String("for"))
			}
			var d time.Duration
			if v := c.String("for"); v != "" {
				if d, err = units.ParseDuration("for", v); err != nil {
					return err
				}
			}
			return withControl(name, func(ctx context.Context, cc *egress.ControlClient, s manager.Session) error {
				grants, err := cc.Allow(ctx, entries, d)
				if err != nil {
					return controlError(name, err)
				}
				doc := map[string]any{"session": name, "grants": grants}
				if s.ToolCache != "" && len(grants) > 0 {
					doc["shared_tool_caches"] = s.ToolCache
				}
				out.result(doc, func(w io.Writer) {
					for _, g := range grants {
						fmt.Fprintf(w, "session %s may now reach %s%s, %s\n", name, g.Entry, hostList(g), untilText(g))
					}
				})
				if s.ToolCache != "" && len(grants) > 0 {
					out.notes([]string{sharedCachesNote(name, entries)})
				}
				return nil
			})
		},
	}
}

// sharedCachesNote says that session name, granted entries live, shares
// its tool caches with the sessions of its workspace started as it was,
// which lack the grant: code one of them left there (a module's source, a
// build or test cache entry) runs with it. A running session's caches are
// bound at its start and cannot move; a session started with the grant
// has caches of its own (request.ToolCacheDir keys them by its hosts).
func sharedCachesNote(name string, entries []string) string {
	return fmt.Sprintf("session %s shares its tool caches (Go's, npm's, pip's, cargo's) with its workspace's sessions started as it was, without this grant: code they left there runs with it; to keep them apart, start it with --allow-host %s instead",
		name, strings.Join(entries, " --allow-host "))
}

// allowOnce is mosaic allow --once: the connections session name holds
// for entries go on, and nothing is granted.
func allowOnce(out *output, name string, entries []string, d string) error {
	if d != "" {
		return errcode.Usage.New("mosaic allow takes --once or --for, not both: --once grants nothing to end")
	}
	return withControl(name, func(ctx context.Context, cc *egress.ControlClient, s manager.Session) error {
		if _, err := cc.AllowOnce(ctx, entries); err != nil {
			return controlError(name, err)
		}
		out.result(map[string]any{"session": name, "once": entries}, func(w io.Writer) {
			fmt.Fprintf(w, "session %s's connections held for %s go on, once (the next is held again)\n", name, strings.Join(entries, ", "))
		})
		return nil
	})
}

func denyCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "deny",
		Usage:     "take back what a running session may reach (a grant or a host it started with), closing its open tunnels there",
		ArgsUsage: "NAME HOST[:PORT]|@GROUP[:write]|ADDRESS...",
		Description: "Removes each entry's grant, refuses its hosts from now on (also those the session started with) and closes the\n" +
			"session's open connections to them. `mosaic allow` gives a host back.",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, entries, err := nameAndEntries(c)
			if err != nil {
				return err
			}
			return withControl(name, func(ctx context.Context, cc *egress.ControlClient, s manager.Session) error {
				closed, err := cc.Deny(ctx, entries)
				if err != nil {
					return controlError(name, err)
				}
				out.result(map[string]any{"session": name, "denied": entries, "closed_connections": closed}, func(w io.Writer) {
					fmt.Fprintf(w, "session %s may no longer reach %s (%d open connections closed)\n", name, strings.Join(entries, ", "), closed)
				})
				return nil
			})
		},
	}
}

func nameAndEntries(c *cli.Context) (string, []string, error) {
	if c.NArg() < 2 {
		return "", nil, errcode.Usage.New("mosaic %s takes a session NAME and at least one HOST[:PORT], @GROUP or address", c.Command.Name)
	}
	name := c.Args().First()
	if err := units.ValidateName(name); err != nil {
		return "", nil, err
	}
	entries := c.Args().Slice()[1:]
	for _, e := range entries {
		if _, err := egress.ParseAllow([]string{e}); err != nil {
			return "", nil, errcode.BadAllowHost.New("%w", err)
		}
	}
	return name, entries, nil
}

// withControl runs f against the control socket of session name's running
// egress proxy, or says why there is none.
func withControl(name string, f func(ctx context.Context, cc *egress.ControlClient, s manager.Session) error) error {
	return connectedWith(manager.Options{TieSelf: true, Say: sayOnStderr}, func(ctx context.Context, m *manager.Manager) error {
		s, err := m.Status(ctx, name)
		if err != nil {
			return err
		}
		switch s.Network {
		case "allow":
		case "none":
			return errcode.NoEgress.New("session %s was started with --network none, which never reaches anything: it has no egress proxy to grant a host through (a session started without --network none has one)", name)
		case "host":
			return errcode.NoEgress.New("session %s has the host's network (--network host, not confined): there is no allowlist to change", name)
		default:
			return errcode.NoEgress.New("session %s has network %s, not allow: it has no egress proxy whose list could change", name, orDash(s.Network))
		}
		if !s.Running() {
			return errcode.NoEgress.New("session %s is %s: its egress proxy is gone with it", name, s.State)
		}
		p, err := m.Paths()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return f(ctx, egress.NewControlClient(p.EgressDir(name)), s)
	})
}

func controlError(name string, err error) error {
	var ce *egress.ControlError
	switch {
	case errors.As(err, &ce) && strings.Contains(ce.Msg, "not a client the proxy answers"):
		return errcode.NotPermitted.New("session %s's egress proxy refused: %s", name, ce.Msg)
	case errors.As(err, &ce):
		return errcode.BadAllowHost.New("%s", ce.Msg)
	case errors.Is(err, egress.ErrNoProxy):
		return errcode.NoEgress.New("session %s's egress proxy does not answer (%w): `systemctl --user status %s` says why", name, err, units.EgressUnitName(name))
	}
	return errcode.Unexpected.New("session %s's egress proxy: %w", name, err)
}

// egressState is the live view of a running session's proxy for status,
// or nil when it has none or it does not answer.
func egressState(ctx context.Context, m *manager.Manager, s manager.Session) *egress.State {
	if s.Network != "allow" || !s.Running() {
		return nil
	}
	p, err := m.Paths()
	if err != nil {
		return nil
	}
	switch started, running := acceptloop.Alive(filepath.Join(p.EgressDir(s.Name), egress.AliveFile)); {
	case !started:
		// Not started yet (it starts on the session's first connection):
		// its list is the one it was given, and nothing happened. Asking it
		// would start it.
		a, err := egress.ParseAllow(s.AllowHosts)
		if err != nil {
			return nil
		}
		return &egress.State{Allow: a.Strings(), Grants: []egress.Grant{}, Refused: []egress.Refusal{}}
	case !running:
		return nil // died
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := egress.NewControlClient(p.EgressDir(s.Name)).State(ctx)
	if err != nil {
		return nil
	}
	return &st
}

// printEgress prints the proxy's live view under status's network line.
func printEgress(w io.Writer, name string, st *egress.State, safe func(string) string) {
	fmt.Fprintf(w, "allowed now: %s\n", listOrNothing(st.Allow, "nothing yet (`mosaic allow "+name+" HOST` grants one)"))
	for _, g := range st.Grants {
		fmt.Fprintf(w, "  granted %s%s by %s at %s, %s\n", g.Entry, hostList(g), g.By, g.At.Local().Format(time.TimeOnly), untilText(g))
	}
	if len(st.Denied) > 0 {
		fmt.Fprintf(w, "  taken back: %s\n", strings.Join(st.Denied, ", "))
	}
	for _, p := range st.Pending {
		fmt.Fprintf(w, "  HELD for your answer: %s (%d connections, since %s): %s, mosaic deny %s %s, or mosaic approve\n",
			safe(p.Target), p.Waiting, p.Since.Local().Format(time.TimeOnly), safe(egress.AllowLine(name, p.Target)), name, safe(p.Target))
	}
	printRefused(w, name, st.Refused, st.RefusedOther, safe)
}

// printRefusals ends a run with what its egress proxy refused: one line
// per destination, with how often, why, and the command that grants it.
func printRefusals(w io.Writer, s manager.Session, safe func(string) string) {
	r := s.EgressRecord
	if r == nil {
		return
	}
	for _, ref := range r.Refused {
		fmt.Fprintf(w, "mosaic: session %s: refused %s %s: %s%s\n", s.Name, safe(ref.Target), times(ref.Count), refusalText(ref.Why), safe(grantHint(s.Name, ref)))
	}
	if r.RefusedOther > 0 {
		fmt.Fprintf(w, "mosaic: session %s: and %d refusals of other targets (`mosaic logs %s --egress` if it was started with --name)\n", s.Name, r.RefusedOther, s.Name)
	}
}

// times is "once", "twice" or "N times".
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// grantHint is what grants a refused target: --allow-host for the next
// run, `mosaic allow` while one runs, for a host off the list; the address
// for one in a special range; the last refusal's reason for a request
// beyond a lent git credential; nothing for what no grant lifts (plain
// HTTP, a limit, no answer).
func grantHint(name string, r egress.Refusal) string {
	switch r.Why {
	case egress.RefusedNotListed:
		if hp, err := egress.NormalizeHost(r.Target); err == nil {
			host := strings.TrimSuffix(hp, ":443")
			return "; to allow it: --allow-host " + host + " (while it runs: " + egress.AllowLine(name, hp) + ")"
		}
	case egress.RefusedSpecial, egress.RefusedGit:
		return "; " + r.Detail
	case egress.RefusedRegistry:
		if g := egress.WriteGrant(r.Target); g != "" {
			return "; to let it write: --allow-host " + g + " (while it runs: mosaic allow " + name + " " + g + ")"
		}
	}
	return ""
}

// printEgressRecord prints what an ended session's proxy left: its list,
// the grants made, and the refusals.
func printEgressRecord(w io.Writer, name string, r *egress.Record, safe func(string) string) {
	how := "as it stopped"
	if !r.Final {
		how = "its last record (it was killed before it could write one as it stopped)"
	}
	fmt.Fprintf(w, "egress:    what its proxy kept, %s at %s\n", how, r.Written.Local().Format(time.DateTime))
	fmt.Fprintf(w, "allowed at the end: %s\n", listOrNothing(r.Allow, "nothing"))
	for _, g := range r.Granted {
		until := "until the session ended"
		if g.Until != nil {
			until = "for " + g.Until.Sub(g.At).Round(time.Second).String()
		}
		fmt.Fprintf(w, "  granted %s%s by %s at %s, %s\n", g.Entry, hostList(g), g.By, g.At.Local().Format(time.TimeOnly), until)
	}
	if len(r.Denied) > 0 {
		fmt.Fprintf(w, "  taken back: %s\n", strings.Join(r.Denied, ", "))
	}
	printRefused(w, name, r.Refused, r.RefusedOther, safe)
}

// printRefused prints the refusals of a proxy's view or record.
func printRefused(w io.Writer, name string, refused []egress.Refusal, other int, safe func(string) string) {
	if len(refused) == 0 {
		fmt.Fprintln(w, "refused:   nothing")
		return
	}
	fmt.Fprintf(w, "refused:   (`mosaic allow %s HOST` adds one while it runs; `mosaic logs %s --egress` has every line)\n", name, name)
	for _, r := range refused {
		fmt.Fprintf(w, "  %s  %d×, last %s: %s\n", safe(r.Target), r.Count, r.Last.Local().Format(time.TimeOnly), refusalText(r.Why))
	}
	if other > 0 {
		fmt.Fprintf(w, "  and %d refusals of other targets\n", other)
	}
}

// listOrNothing is list joined, or nothing when it is empty.
func listOrNothing(list []string, nothing string) string {
	if len(list) == 0 {
		return nothing
	}
	return strings.Join(list, ", ")
}

func refusalText(why string) string {
	switch why {
	case egress.RefusedNotListed:
		return "not on the list"
	case egress.RefusedSpecial:
		return "resolves to a special range (private, loopback, link-local, reserved)"
	case egress.RefusedPlain:
		return "plain HTTP"
	case egress.RefusedLimit:
		return "over a limit (connections, head size)"
	case egress.RefusedUnreachable:
		return "unreachable (no address, or no answer)"
	case egress.RefusedGit:
		return "beyond the git credential lent (--lend-git)"
	case egress.RefusedRegistry:
		return "a write (publish, login, tokens) to a read-only registry group"
	case egress.RefusedSNI:
		return "TLS in its tunnel naming another host (SNI)"
	}
	return why
}

func hostList(g egress.Grant) string {
	if len(g.Hosts) == 0 || (len(g.Hosts) == 1 && g.Hosts[0] == g.Entry) {
		return ""
	}
	return " (" + strings.Join(g.Hosts, ", ") + ")"
}

func untilText(g egress.Grant) string {
	if g.Until == nil {
		return "until the session ends"
	}
	return "until " + g.Until.Local().Format(time.TimeOnly) + " (" + time.Until(*g.Until).Round(time.Second).String() + " from now)"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
