package units

import "mosaic/sandbox"

// The session-ended stage is a service's ExecStopPost (records.EndedMain
// parses it and says what it does):
//
//	mosaic-stage session-ended --state DIR [--egress-alive FILE]
//
// Its command line is written here, with the unit that runs it; the
// parser lives with the records it writes. (It still takes --drop FILE,
// which units a mosaic before issue 31 started name.)

// EndedArgv is the stage's command line; egressAlive, the file the
// session's egress proxy holds locked while it runs (egress.AliveFile), is
// "" for a session without one.
func EndedArgv(stageBin, stateDir, egressAlive string) []string {
	argv := []string{stageBin, sandbox.EndedStage, "--state", stateDir}
	if egressAlive != "" {
		argv = append(argv, "--egress-alive", egressAlive)
	}
	return argv
}
