package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// journald keeps at most LogRateLimitBurst= lines per LogRateLimitIntervalSec=
// (10,000 per 30 s by default) from one unit of the system, and every unit of
// a user's manager counts as that manager's one unit, user@UID.service: a
// session that prints much, or a neighbour that does, loses lines without a
// word in its own log (LogRateLimit*= on a user's unit is not applied). What
// journald does say, in its own log (MESSAGE_ID
// a596d6fe7bfa4994828e72309e95d61e), once the next window begins, is
// "Suppressed N messages from user@UID.service". journalDropped reads that,
// so that `mosaic logs` and `status` can say the log is incomplete.
const journalDroppedID = "a596d6fe7bfa4994828e72309e95d61e"

// journalDropped sums what journald said it dropped of this user's units
// since t; 0 when it said nothing or its log cannot be read (it is in the
// system journal, which a user outside the systemd-journal group cannot).
func journalDropped(since time.Time) int {
	out, _ := exec.Command("journalctl", "-q", "--no-pager", "-o", "cat", "MESSAGE_ID="+journalDroppedID,
		"--since", fmt.Sprintf("@%d", since.Unix()-1)).Output()
	return parseDropped(string(out), "user@"+strconv.Itoa(os.Getuid())+".service")
}

// parseDropped sums the N of each "Suppressed N messages from UNIT" line.
func parseDropped(lines, unit string) int {
	total := 0
	for _, l := range strings.Split(lines, "\n") {
		var n int
		var from string
		if _, err := fmt.Sscanf(strings.TrimSpace(l), "Suppressed %d messages from %s", &n, &from); err == nil && from == unit {
			total += n
		}
	}
	return total
}

// droppedWarning is what logs and status say when journald dropped lines.
func droppedWarning(n int) string {
	return fmt.Sprintf("journald dropped %d lines of your sessions' output while this session ran (its rate limit counts all of a user's units together): this log is incomplete; for a session's whole output, use `mosaic run ... > FILE`, or let the command write to a file in its workspace", n)
}
