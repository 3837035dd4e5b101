package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"mosaic/cmd/mosaic/internal/doctor"
	"mosaic/internal/errcode"
	"mosaic/sandbox"
)

func doctorCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check that this host can run confined sessions, and with --probe that a real one is confined",
		Description: "One line per check, with what to do when it is not ok. Exits 1 when a session could not be started\n" +
			"(or, with --probe, when the probe session could do what it must not, or not what it must).",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "probe", Usage: "start a throwaway session against stand-ins and report each check allowed or denied"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "also list the rows of every session's syscall filter (listed anyway when a check fails)"},
			&cli.StringFlag{Name: "sandbox", Value: sandbox.ModeBwrap, Usage: "the mode to check (and probe): bwrap, or landlock (for hosts where bwrap cannot run: also shows what it confines less)"},
			jsonFlag,
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			ctx := context.Background()
			prog := newProgress(out.stderr, !out.json && isTerminal(os.Stderr), "mosaic doctor")
			prog.set("checking the host")
			mode := c.String("sandbox")
			if !sandbox.ValidMode(mode) {
				return errcode.BadSandbox.New("--sandbox %s: use bwrap or landlock", mode)
			}
			checks, m := doctor.Doctor(ctx)
			checks = doctor.ForSandbox(checks, mode)
			if m != nil {
				defer m.Close()
			}
			healthy := doctor.Healthy(checks)
			var answers []doctor.ProbeAnswer
			var probeErr error
			if c.Bool("probe") && healthy {
				prog.set("running the probe session")
				answers, probeErr = doctor.ProbeSandbox(ctx, m, mode)
			}
			prog.done()
			probeOK := probeErr == nil
			for _, a := range answers {
				probeOK = probeOK && a.OK
			}
			report := map[string]any{"ok": healthy && probeOK, "checks": checks, "syscall_filter": sandbox.SyscallRules, "sandbox": mode}
			if mode == sandbox.ModeLandlock {
				report["landlock_rows"] = sandbox.LandlockRows
			}
			if c.Bool("probe") {
				p := map[string]any{"answers": answers, "network": networkNote}
				if probeErr != nil {
					p["error"] = probeErr.Error()
				} else if !healthy {
					p["error"] = "not run: the checks above failed"
				}
				report["probe"] = p
			}
			out.result(report, func(w io.Writer) {
				var b strings.Builder
				printDoctor(&b, checks, c.Bool("probe"), healthy, answers, probeErr, c.Bool("verbose") || !healthy || !probeOK)
				if mode == sandbox.ModeLandlock {
					fmt.Fprintln(&b)
					printLandlockRows(&b)
				}
				io.WriteString(w, wrapLines(b.String(), fitWidth(out, false)))
			})
			switch {
			case !healthy:
				out.code = errcode.ExitFailure
			case !probeOK:
				out.code = errcode.ExitFailure
			}
			return nil
		},
	}
}

// printDoctor prints the checks, the syscall filter's rows when rules,
// and the probe's answers.
func printDoctor(w io.Writer, checks []doctor.Check, probe, healthy bool, answers []doctor.ProbeAnswer, probeErr error, rules bool) {
	marks := map[string]string{"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
	for _, c := range checks {
		fmt.Fprintf(w, "%s %-18s %s\n", marks[c.Status], c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "     %-18s fix: %s\n", "", c.Fix)
		}
	}
	if rules {
		printSyscallRules(w)
	}
	if !probe {
		return
	}
	fmt.Fprintln(w, "\nprobe session:")
	switch {
	case !healthy:
		fmt.Fprintln(w, "  not run: fix the failed checks above first")
		return
	case probeErr != nil:
		fmt.Fprintf(w, "  FAIL %v\n", probeErr)
		return
	}
	for _, a := range answers {
		mark := "ok  "
		if !a.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s %-16s %-8s (must be %s): %s\n", mark, a.Name, a.Got, a.Want, a.What)
		if a.Gap != "" {
			fmt.Fprintf(w, "       %-16s known gap of --sandbox landlock: %s\n", "", a.Gap)
		}
	}
	fmt.Fprintln(w, "  note network          "+networkNote)
}

// networkNote is what the probe says of the network modes it did not try.
const networkNote = "the probe ran with --network none (generic's default); a session with --network host shares your network namespace and is NOT confined there (mosaic status says which a session has)"

// printSyscallRules lists the rows of every session's syscall filter.
func printSyscallRules(w io.Writer) {
	fmt.Fprintln(w, "\nsyscall filter (EPERM in every session; a profile's SeccompAllow=NAME lifts a row not marked fixed):")
	for _, r := range sandbox.SyscallRules {
		calls := r.What
		if calls == "" {
			calls = strings.Join(r.Syscalls, ", ")
		}
		fixed := ""
		if r.Fixed {
			fixed = ", fixed"
		}
		fmt.Fprintf(w, "  %-18s %s%s: %s\n", r.Name, calls, fixed, r.Reason)
	}
}
