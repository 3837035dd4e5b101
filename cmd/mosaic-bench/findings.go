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
557 writes and 4,919 syscalls before, 372 and 3,440 after). Then the CLI, not systemd, set the
time: through godbus each Get cost it more CPU than systemd spent answering (reflection, a
header map, a goroutine handoff and four system calls per call): ~100 ms of user CPU at 200
sessions, systemd ~35 ms. The Gets now go over a connection of their own on which mosaic encodes
them and decodes the answers itself (manager/bulkget: Properties.Get and the types sessions'
properties have, nothing else), written some sixty at a time while systemd answers, the answers
read in 64 KiB reads. At 200 sessions (main's binary against this one, in turn, load 3.7-6.4):
the CLI's user CPU 113 -> 25 ms (perf stat -r 5), its system calls 9,302 -> 1,546 (strace -c),
the median of 10 lists 178 -> 118 ms. What is left is systemd answering 1,200 Gets and the wait
for a CPU on a loaded machine.

**mosaic.slice's limits.** Every start and run read them with a GetAll of the Slice interface
(some 80 properties computed by systemd and decoded by reflection) to look at three; now three
Gets sent at once.

**Go process starts.** A service start runs the mosaic binary three times (the CLI, the exec shim
in the unit, the init in bwrap; a named one a fourth, its ExecStopPost), a scope twice (no shim,
see below), and every package's
init runs before main picks the stage. The session-name regexp (726 allocations) became a loop;
then 762 of the 1,289 allocations left at init were blackfriday's HTML entity table, linked
through urfave/cli's man page support (ToMan). mosaic now writes its man page in roff itself
(cmd/mosaic/man.go) and every build uses -tags urfave_cli_no_docs (the Makefile's TAGS, the
tests' builds; a test checks both and that nothing then links blackfriday); the credential-name
regexp became a loop too. Per start of a stage (mosaic init with no arguments, perf stat -r 200,
main's binary against this one in turn): 1,289 -> 484 allocations at init, ~450-480 -> ~395-415
page faults, 4.6 -> 3.2-4.2 ms of CPU on a machine at load 4-8. The floor is the Go runtime: a
minimal static Go program takes ~190 faults and 1.9 ms here. The init marks inherited
descriptors close-on-exec with one close_range(CLOSE_RANGE_CLOEXEC) instead of listing
/proc/self/fd.

**Where the client-side CPU of mosaic run --scope goes.** Everything of a scope run but systemd is
mosaic's process tree, so perf stat counts it whole (user CPU, 30 runs, load ~4): the bare peer
(systemd-run --scope + bwrap) 14-19 ms and ~560 page faults; mosaic 40-45 ms before, ~38.5 ms
and ~1,700 faults now. perf record of 30 runs: the CLI and the exec shim 71% (godbus ~25% of
that, the Go runtime's start and package inits ~14%, urfave/cli's flag handling ~7%, where
FlagNames runs a regexp per flag lookup, JSON reflection for the record ~3%), the init 14%, bwrap
11%, /usr/bin/true 2%. Three Go starts and godbus's per-message cost are most of the distance to
the peer; none of it is a check (the hardening table: microseconds).

**The cgroup move.** Process starts and exits traced with perf (sched_process_exec/fork/exit,
system-wide, no ptrace) put a scope run's time in systemd's job, and strace on the user manager
put that in one write: the first PID written to the new scope's cgroup.procs takes 10-22 ms, the
next ones some 50 us. Moving a process between cgroups takes the kernel's cgroup threadgroup
rwsem for writing, and a percpu rwsem's writer waits for an RCU grace period unless another
writer went through within the last one (rcu_sync). systemd-run --scope pays it as mosaic does;
so does every service (systemd's forked child moves itself: 14.6 ms in the same trace). Back to
back, though, a command that ends within a grace period of its predecessor's move finds the
window open: in a loop of 8, half the bare peer's moves took under 0.1 ms and none of mosaic's
(its run is longer than the window). So the back-to-back table favours whatever is already
fastest, and the targets are computed from the one-at-a-time table as well, which is what an
agent's tool calls (a model's turn apart) meet.

**A scope without an exec shim.** The scope path ran three Go programs before the command (the
CLI, the shim, the init) and built the sandbox only once systemd's job was done. mosaic now
starts bwrap itself with --info-fd and --block-fd (sandbox.Held): bwrap clones the init and
reports its PID, systemd adopts the init into the scope (StartTransientUnit with its PID; bwrap's
monitor, which only waits, stays with mosaic), and bwrap builds the whole sandbox (its namespaces, ~20 mounts) during the grace period
above; the byte on --block-fd then only lets the init exec. The scope check the shim made moved
into the init, before anything else (TestScopeInitOutsideRefused). Interleaved with the old
binary and the peer, 30 runs each, 300 ms apart: mosaic run --scope 70.3 -> 61.4 ms (peer 47.6)
and in another round 60.0 -> 53.6 (peer 37.2). What is left on the path before the move is
bwrap's own start until its clone (2.6 ms, the network namespace ~0.9 ms of it).

**Smaller steps.** Launch dials systemd while it checks the request (the connection is round
trips, the check CPU), and a scope run does not wait for the connection at all until it starts
its scope: its name, state directory and sandbox are made meanwhile (in the trace the wait left
is ~0.1 ms; main's binary against this one, interleaved, 40 runs each 300 ms apart: 58.1 ->
51.1 ms, peer 39.3). The end of a run makes the session's record again instead of
reading session.json back (~0.3 ms), and a scope writes no init-args file. Removing an unnamed
run's state directory stays on the path: 1.5-4 ms of renames and unlinks on the state
directory's disk (ext4 here), measured step by step with MOSAIC_TRACE marks.

**Tried and not kept.** (1) Starting a scope's exec shim before the claim: os/exec's Start waits
until the child has exec'd, so the cost only moved. (2) AttachProcessesToUnit, to start the
scope with bwrap's PID before bwrap has cloned the init and add the init after: systemd takes it
only for an active unit with delegation, so it would cost Delegate=yes and a round trip after the
job, for the 2.6 ms above. (3) The manager's private socket, as systemd-run --user uses: no
difference measured for one run, and 100 concurrent clients on it get every signal. (4) Not
subscribing: without Subscribe systemd still sends the job's end to its client, and with AddRef
on the unit its property changes, but neither was measurably faster in interleaved runs.
(5) GODEBUG containermaxprocs=0 (the runtime reads /proc/self/cgroup and mountinfo at every
start, ~4% of a stage's start in perf record): not measurable in wall clock here.

**What a second binary would buy.** The in-sandbox stages (the exec shim, the init) link the
whole mosaic binary: 15.8 MB, ~380 page faults and ~1 ms of package inits before main (perf
record: runtime.doInit1 23% of a start). A static program with the init's own imports (x/sys/unix,
encoding/json, net, os/signal, flag) starts in 3.46 ms against mosaic's 5.25 (perf stat -r 200,
a minimal Go program 2.87): ~1.8 ms per stage, one on the scope path, two on the service path.
(A binary with only sandbox.Init linked, its packages unsplit, is 6.3 MB and gets most of it:
6.5 against 8.7 ms on the same loaded machine.) It was built and taken out again for one reason:
mosaic would run a file beside itself that it does not run today, and a session whose workspace
(or --rw path) holds mosaic's directory could create that file when it is missing, and the next
session's exec shim would be the session's program, outside bwrap, with the credentials in its
environment. Pinning covers a binary that exists, not one that does not: the stage needs
mosaic's directory read-only in such sessions (and a workspace that is that directory cannot
have it), or a root-owned install; left for a later issue with that decided.

**How much one run of the bench moves.** Three make bench runs of nearly the same tree within
half an hour gave the one-at-a-time scope ratio as 1.32, 1.36 and 1.46 (the load at start 0.8 to
1.7); interleaved A/B runs of 40 (above) are the figures to compare binaries by.

**Before and after, interleaved.** The binary before these changes and after, run in turn 30
times each beside the two peers on the same loaded machine (medians, wall clock). The previous
round: mosaic run 92.5 -> 85.3 ms (hand-rolled peer 62.0); mosaic run --scope 67.2 -> 57.6 ms
(scope peer 37.7). This round (load 3.8-4.8): mosaic run 94.8 -> 91.4 ms (hand-rolled peer 67.5,
1.35x); mosaic run --scope 68.5 -> 63.9 ms (scope peer 40.6, 1.57x).

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
