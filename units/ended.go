package units

// The session-ended stage is a service's ExecStopPost (records.EndedMain
// parses it and says what it does):
//
//	mosaic session-ended --state DIR [--drop FILE]
//
// Its command line is written here, with the unit that runs it; the
// parser lives with the records it writes.

// EndedStage is the stage's name, mosaic's first argument.
const EndedStage = "session-ended"

// EndedArgv is the stage's command line; dropFile may be "".
func EndedArgv(mosaicBin, stateDir, dropFile string) []string {
	argv := []string{mosaicBin, EndedStage, "--state", stateDir}
	if dropFile != "" {
		argv = append(argv, "--drop", dropFile)
	}
	return argv
}
