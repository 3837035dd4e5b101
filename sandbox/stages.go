package sandbox

// The stage binary (cmd/mosaic-stage, installed beside mosaic) runs every
// stage of a session that is not the user's own mosaic: the exec shim
// (ShimStage), the init and the session-ended ExecStopPost (EndedStage,
// manager/records). It links sandbox/inside, this package and the
// records, and no CLI, D-Bus or HTTP, so that each of those process starts
// costs little. Their
// names are here, below both the units that write their command lines and
// the binary that reads them.

// EndedStage is the session-ended stage's name, the stage binary's first
// argument (units.EndedArgv writes its command line, records.EndedMain
// reads it).
const EndedStage = "session-ended"

// InitHoldEnv (a test build's only) holds bwrap's child this long before
// it runs the init (testHoldBwrap): a sandbox still being built when a stop
// comes.
const InitHoldEnv = "MOSAIC_TEST_INIT_HOLD"
