// Command mosaic-stage runs the stages of a session that are not the
// user's own mosaic: the exec shim (a service's main process, which checks
// systemd's layer and becomes bwrap), the init (PID 1 inside bwrap) and the
// session-ended stage (a service's ExecStopPost).
// mosaic writes every one of their command lines; no one else calls it.
//
// It is mosaic's second binary, installed beside it and built from the same
// tree (manager/stagebin refuses a session otherwise), so that each of those
// process starts costs a small binary's: it links the code that runs
// inside a session (sandbox/inside), what the host wrote for it (sandbox)
// and the records, and no CLI library, D-Bus or HTTP (TestStageLinksLittle).
package main

import (
	"fmt"
	"os"

	"mosaic/manager/records"
	"mosaic/sandbox"
	"mosaic/sandbox/inside"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case sandbox.ShimStage:
			err := inside.ShimMain(os.Args[2:])
			fmt.Fprintf(os.Stderr, "mosaic: refusing to build the sandbox: %v\n", err)
			os.Exit(sandbox.ExitSandboxRefused)
		case "init":
			os.Exit(inside.Init(os.Args[2:]))
		case sandbox.EndedStage:
			records.EndedMain(os.Args[2:], os.Getenv)
			os.Exit(0)
		}
	}
	fmt.Fprintf(os.Stderr, "mosaic-stage: the stages mosaic runs in its sessions (%s, init, %s); mosaic starts them, not you\n",
		sandbox.ShimStage, sandbox.EndedStage)
	os.Exit(2)
}
