package sandbox

import (
	"io"
	"os"
)

// The stage binary (cmd/mosaic-stage, installed beside mosaic) runs every
// stage of a session that is not the user's own mosaic: the exec shim
// (ShimStage), the init, the session-ended ExecStopPost (EndedStage,
// manager/records) and a mosaic run's tie (TieStage, manager). It links this
// package and the records, and no CLI, D-Bus or HTTP, so that each of those
// process starts costs little. Their names are here, below both the units
// that write their command lines and the binary that reads them.

// EndedStage is the session-ended stage's name, the stage binary's first
// argument (units.EndedArgv writes its command line, records.EndedMain
// reads it).
const EndedStage = "session-ended"

// TieStage is a mosaic run's tie, the stage binary's first argument: a
// child of the run that lives until its stdin, a pipe only the run holds,
// reaches EOF (see manager's startTie).
const TieStage = "run-tie"

// TieMain is the tie: it returns once its stdin is closed.
func TieMain() { _, _ = io.Copy(io.Discard, os.Stdin) }
