package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"mosaic/internal/acceptloop"
	"mosaic/internal/errcode"
	"mosaic/internal/termsafe"
	"mosaic/manager"
	"mosaic/sandbox/egress"
)

// heldRequest is one connection a session started with --ask holds for
// an answer.
type heldRequest struct {
	Session string `json:"session"`
	egress.Pending
}

// approveCommand lists what the sessions started with --ask hold, and on
// a terminal answers each as it comes: allow it for the session, deny it,
// or leave it (refused when its hold ends).
func approveCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:  "approve",
		Usage: "answer the connections sessions started with --ask hold: allow or deny each, live",
		Description: "Lists the connections every running session holds for an answer (--ask) and, on a terminal, asks about each\n" +
			"as it comes: a (allow the host for the session: mosaic allow), o (let the connections held now go on, once: mosaic\n" +
			"allow --once), d (deny it: mosaic deny), or Enter (leave it: refused when its 30 s hold ends). With --notify it shows\n" +
			"each as a desktop notification instead, whose buttons answer it (run it in your graphical session). Until Ctrl-C or end of input. Not on a terminal, or with --json, it lists them once.",
		Flags: []cli.Flag{jsonFlag,
			&cli.BoolFlag{Name: "notify", Usage: "show each held connection as a desktop notification whose buttons answer it, until Ctrl-C"}},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return errcode.Usage.New("mosaic approve takes no arguments: it answers every session's held connections (mosaic allow NAME HOST answers one)")
			}
			if c.Bool("notify") && out.json {
				return errcode.Usage.New("mosaic approve takes --notify or --json, not both: --json lists what is held once")
			}
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				if c.Bool("notify") {
					return notifyHeld(ctx, m, out.stdout)
				}
				if out.json || !isTerminal(os.Stdin) {
					held, err := heldRequests(ctx, m)
					if err != nil {
						return err
					}
					out.result(map[string]any{"pending": held}, func(w io.Writer) {
						if len(held) == 0 {
							fmt.Fprintln(w, "no session holds a connection for an answer")
						}
						for _, h := range held {
							fmt.Fprintf(w, "%s wants %s (%d connections held since %s)\n", h.Session, termsafe.Escape(h.Target, false), h.Waiting, h.Since.Local().Format(time.TimeOnly))
						}
					})
					return nil
				}
				return approveLive(ctx, m, out.stdout, bufio.NewReader(os.Stdin))
			})
		},
	}
}

// approveLive asks about each held connection as it comes, until the end
// of input.
func approveLive(ctx context.Context, m *manager.Manager, w io.Writer, in *bufio.Reader) error {
	fmt.Fprintln(w, "mosaic approve: waiting for sessions' held connections (Ctrl-C to end)")
	asked := map[string]bool{}
	for {
		held, err := heldRequests(ctx, m)
		if err != nil {
			return err
		}
		var next *heldRequest
		for i := range held {
			if k := heldKey(held[i]); !asked[k] {
				asked[k], next = true, &held[i]
				break
			}
		}
		if next == nil {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		fmt.Fprintf(w, "%s wants %s: [a]llow for the session, [o]nce, [d]eny, Enter to leave it? ", next.Session, termsafe.Escape(next.Target, false))
		line, err := in.ReadString('\n')
		if err != nil {
			return nil
		}
		answer := strings.TrimSpace(strings.ToLower(line))
		if said, ok := heldAnswers[answer]; ok {
			if err := answerHeld(*next, answer); err != nil {
				fmt.Fprintf(w, "  not answered: %v\n", err)
			} else {
				fmt.Fprintf(w, "  %s\n", said)
			}
		}
	}
}

// heldAnswers are what approve takes for a held connection, and what each
// does: a allows the host for the session, o lets the connections held
// now go on, d denies it.
var heldAnswers = map[string]string{"a": "allowed", "o": "let through once", "d": "denied"}

// answerHeld gives h its answer (one of heldAnswers' keys).
func answerHeld(h heldRequest, answer string) error {
	return withControl(h.Session, func(ctx context.Context, cc *egress.ControlClient, s manager.Session) error {
		var err error
		switch answer {
		case "a":
			_, err = cc.Allow(ctx, []string{h.Target}, 0)
		case "o":
			_, err = cc.AllowOnce(ctx, []string{h.Target})
		case "d":
			_, err = cc.Deny(ctx, []string{h.Target})
		}
		return err
	})
}

// heldRequests are the connections every running session in network
// allow holds, oldest first per session.
func heldRequests(ctx context.Context, m *manager.Manager) ([]heldRequest, error) {
	sessions, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	p, err := m.Paths()
	if err != nil {
		return nil, err
	}
	held := []heldRequest{}
	for _, s := range sessions {
		// A session's list entry may not carry its network: any running
		// one is asked, and one with no proxy does not answer.
		if !s.Running() || s.Network == "none" || s.Network == "host" {
			continue
		}
		// One whose proxy does not run holds nothing: asking would start
		// it (socket activation).
		if _, running := acceptloop.Alive(filepath.Join(p.EgressDir(s.Name), egress.AliveFile)); !running {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := egress.NewControlClient(p.EgressDir(s.Name)).State(cctx)
		cancel()
		if err != nil {
			continue
		}
		for _, pe := range st.Pending {
			held = append(held, heldRequest{Session: s.Name, Pending: pe})
		}
	}
	return held, nil
}
