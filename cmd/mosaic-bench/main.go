// Command mosaic-bench measures mosaic side by side with its peers in one
// run on one machine: a confined one-shot `true` against systemd-run with the
// same properties and the same bwrap argv, the hand-rolled service and scope
// a user would write instead (a plain bwrap, no exec shim, no init), bwrap
// alone, a plain exec and Anthropic's sandbox-runtime (srt); start latency;
// 100 concurrent starts from one process and from 100; list at 100 and 200
// sessions; stopping them; the memory an idle session costs; what each
// hardening step costs; and where the time of `mosaic run` (and --scope) goes.
//
//	mosaic-bench run --mosaic bin/mosaic [--srt PATH] > docs/benchmarks.json
//	mosaic-bench render docs/benchmarks.json > docs/BENCHMARKS.md
//
// `run` needs a systemd user manager (make bench uses contrib/rig.sh where
// there is none); every figure is a comparison from the same run, never a
// threshold.
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mosaic-bench run --mosaic PATH [--srt PATH] [--n N] | mosaic-bench render FILE")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		var r *Report
		r, err = runAll(os.Args[2:])
		if err == nil {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			err = enc.Encode(r)
		}
	case "render":
		err = render(os.Args[2:])
	case "syscall-child": // see syscallCost
		err = syscallChild()
	default:
		err = fmt.Errorf("unknown verb %q: use run or render", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mosaic-bench: %v\n", err)
		os.Exit(1)
	}
}
