package main

// whereTheTimeGoes is the analysis behind the figures (issue 21), measured
// by what does not depend on the machine's load: D-Bus messages
// (dbus-monitor), process starts and their CPU time and page faults
// (perf stat -r), allocations at package init (GODEBUG=inittrace=1). It is
// text, not a measurement of this run: update it with the code.
const whereTheTimeGoes = `
## Where the time goes (issue 21)

Counted rather than timed (wall-clock figures on a loaded 2-CPU machine are noise):

**D-Bus round trips of the CLI before the unit starts.** Before: Hello, AddMatch (go-systemd's
job signals), Get Version, Subscribe (during which systemd itself makes two calls to dbus-daemon
to track the client), AddMatch (the unit's PropertiesChanged), then StartTransientUnit: five
sequential round trips after authentication. After: Get Version is sent with the Hello's answer
and answered during go-systemd's AddMatch; Subscribe and the watch's AddMatch are sent without
waiting (no reply asked): systemd and dbus-daemon handle one connection's messages in order, so
both take effect before StartTransientUnit is handled. Two round trips, then StartTransientUnit.

**After the command ended.** Before: the run and the scope path waited for ResetFailedUnit (a
unit collected already: an error reply) and RemoveMatch, two round trips between the end and the
exit status. After: both sent without a reply; a later start of the same name clears a leftover
itself (claimName), and dbus-daemon drops a closed connection's rules.

**Job ends fanned out to every client.** go-systemd adds, on every connection, a match rule for
every JobRemoved of every unit; systemd broadcasts one per job, so with N mosaic processes
starting at once each got and decoded all N job ends (N×N messages through dbus-daemon).
Connect now removes that rule and each start or stop asks for its own unit's job end only
(arg2='UNIT'), taken back once the job is over. With this and the round trips above (main's
binary against this one, strace -c): one mosaic start among 40 starting at once, 191 recvmsg
and 1,287 syscalls before, 89 and 909 after; a lone mosaic run, 68 recvmsg / 852 syscalls
before, 52 / 762 after; the CPU time of 60 concurrent mosaic start processes (perf stat, the
CLIs only) 1.93 s before, 1.32 s after.

**mosaic start / status.** GetUnitProcesses went out after the property reads; it is now sent in
the same batch: one round trip less.

**mosaic list.** One ListUnitsByPatterns and then, per session, Gets sent at once: 9 per service.
A running service has no exit to read, so it now gets 6 (Result, MainPID, ExecMainStartTimestamp,
Memory, Tasks, CPU): at 200 sessions 1,200 calls instead of 1,800 (strace -c at 60 sessions:
557 writes and 4,919 syscalls before, 372 and 3,440 after).

**Go process starts.** A session start runs the mosaic binary three times (the CLI, the exec shim
in the unit, the init in bwrap; a named service a fourth, its ExecStopPost), and every package's
init runs before main picks the stage. Per start of the exec-bwrap stage (perf stat -r 200; page
faults are steady, CPU time moves with the load): before, 1,927 allocations at init and ~480 page
faults; now 1,204 and ~430-460 (the session-name regexp, 63 nested repetitions and 726
allocations, is a loop). Of what is left, 762 allocations are blackfriday's HTML entity table,
linked through urfave/cli's man page support: built with the tag urfave_cli_no_docs the binary
makes 438 allocations and ~385 faults per start. For scale: a binary of only mosaic's sandbox
stages takes ~344 faults, a minimal static Go program 189 (1.6 ms of CPU), /usr/bin/true 47.
So a second, sandbox-only binary would save little beyond dropping urfave/cli's docs (which
needs a man page written another way: not done here); the floor is the Go runtime itself, some
1.5 ms of CPU per start, twice per session inside the unit.

**Before and after, interleaved.** The binary before these changes and after, run in turn 30
times each beside the two peers on the same loaded machine (medians, wall clock): mosaic run
92.5 -> 85.3 ms (hand-rolled peer 62.0); mosaic run --scope 67.2 -> 57.6 ms (scope peer 37.7).

**The one-shot rows say the same.** "systemd-run, same properties and bwrap argv" runs mosaic's
exec shim and init inside the unit; the hand-rolled peer runs the same properties and a plain
bwrap without them. The difference between the two rows is what the two Go starts and their
checks cost, and it is most of the distance between mosaic run and the hand-rolled peer: mosaic
run itself is at or below the first row (its CLI adds less than systemd-run's). On a loaded
machine (see the load average above) the Go starts stretch most, since each wants ~6 ms of CPU.

**Inside the unit.** systemd's namespace setup for the service (PrivateUsers, PrivateTmp,
ProtectSystem, TemporaryFileSystem, binds, PrivateNetwork) is shared with the hand-rolled peer;
what mosaic adds is the shim (a Go start, the unit check: a few stats and readlinks), the init (a
Go start, the sandbox check, the filter, a Landlock thread, READY=1 and the notify barrier). The
hardening table above shows the checks themselves cost microseconds; the Go starts dominate.
`
