package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// render writes the Markdown report of a run's JSON.
func render(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: mosaic-bench render FILE.json")
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	writeReport(os.Stdout, &r, args[0])
	return nil
}

func writeReport(w io.Writer, r *Report, jsonFile string) {
	fmt.Fprintf(w, "# mosaic benchmarks\n\nWritten by `make bench` on %s (UTC); every figure below comes from that one run, side by side. The same figures: `%s`.\n\n", r.Date.Format("2006-01-02 15:04"), jsonFile)
	var keys []string
	for k := range r.Machine {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(w, "| machine | |\n|---|---|")
	for _, k := range keys {
		fmt.Fprintf(w, "| %s | %s |\n", k, r.Machine[k])
	}
	fmt.Fprintln(w, "\n## Targets\n\nEach a ratio of medians from this one run (the one-shot ones interleaved, one at a time).\n\n| what | value | target | met |\n|---|---|---|---|")
	for _, x := range r.Ratios {
		met := "yes"
		switch {
		case x.Target == "—":
			met = "—" // a comparison, not a target
		case !x.Met && x.Missed != "":
			met = "**no**: " + x.Missed
		case !x.Met:
			met = "**no**"
		}
		fmt.Fprintf(w, "| %s | %.2f | %s | %s |\n", x.What, x.Value, x.Target, met)
	}
	if len(r.Messages) > 0 {
		fmt.Fprintln(w, "\n## D-Bus messages per command (MOSAIC_TRACE=1: its connection's, Hello included)\n\n| what | calls | sent without reply | replies | signals | all |\n|---|---|---|---|---|---|")
		for _, m := range r.Messages {
			fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d |\n", m.What, m.Calls, m.NoReply, m.Replies, m.Signals, m.Calls+m.NoReply+m.Replies+m.Signals)
		}
		fmt.Fprint(w, fewerMessages)
	}
	if len(r.Processes) > 0 {
		fmt.Fprintln(w, "\n## Process starts (execve) from the command to its end, with strace: its own tree, and the user manager's children meanwhile\n\n| what | command's tree | user manager's | programs |\n|---|---|---|---|")
		for _, p := range r.Processes {
			fmt.Fprintf(w, "| %s | %d | %d | %s |\n", p.What, p.Command, p.Manager, strings.Join(p.Programs, ", "))
		}
	}
	table(w, "One-shot, one at a time: a confined `/usr/bin/true`, start to exit, the peers compared in turn, interleaved, each after 250 ms idle", r.Spaced)
	table(w, "One-shot, back to back: a confined `/usr/bin/true`, start to exit, each command n times in a row", r.OneShot)
	table(w, "Start latency: until the command runs (the two in turn, interleaved, each after 250 ms idle)", r.Start)
	table(w, "Concurrency", r.Concurrency)
	if len(r.Footprint) > 0 {
		fmt.Fprintf(w, "\n## Footprint\n\nMemory an idle session costs beyond its command (bwrap's monitor and mosaic's init), over %.0f sessions: **%.2f MiB PSS** (%.2f MiB RSS).\n",
			r.Footprint["sessions"], r.Footprint["pss_per_session"], r.Footprint["rss_per_session"])
	}
	table(w, "Where the time of `mosaic run -- /usr/bin/true` goes (MOSAIC_TRACE=1)", r.Breakdown)
	table(w, "Egress: time to the first byte of a streamed answer, plain tunnel vs credential injection", r.Egress)
	table(w, "The session's way out against the host's: a download (the whole of it) and a new connection (to its first byte), by curl, on the test network's host side", r.Device)
	table(w, "A kept home: a named session's run with an empty and an unchanged 150 MB home, and the init's own load and save of it", r.Home)
	table(w, "Where the time of `mosaic run --scope -- /usr/bin/true` goes (MOSAIC_TRACE=1)", r.ScopeBreakdown)
	if len(r.Hardening) > 0 {
		fmt.Fprintf(w, "\n## What each hardening step costs\n\nMeasured on its own in mosaic-bench's process (the syscall in a child that installs the filter), median and mean of n, in **microseconds**.\n\n| step | n | median µs | mean µs | what runs |\n|---|---|---|---|---|\n")
		for _, s := range r.Hardening {
			fmt.Fprintf(w, "| %s | %d | %.3f | %.3f | %s |\n", s.Name, s.N, s.MedianMs*1000, s.MeanMs*1000, s.Command)
		}
	}
	table(w, "Clone mode: a start against a direct one and against the same copy made by hand; the finish step and diff of a 100-file change", r.Clone)
	fmt.Fprint(w, whereTheTimeGoes)
	if len(r.Notes) > 0 {
		fmt.Fprintln(w, "\n## Notes")
		for _, n := range r.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

func table(w io.Writer, title string, stats []Stat) {
	if len(stats) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## %s\n\n| what | n | median ms | min | max | mean ms | ± sd | command |\n|---|---|---|---|---|---|---|---|\n", title)
	for _, s := range stats {
		fmt.Fprintf(w, "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %s |\n", s.Name, s.N, s.MedianMs, s.MinMs, s.MaxMs, s.MeanMs, s.StdMs, strings.ReplaceAll(s.Command, "|", "\\|"))
	}
}
