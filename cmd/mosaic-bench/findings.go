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
the median of 10 lists 178 -> 118 ms. What was left was systemd answering 1,200 Gets, and two
things more came off that. Three of a running session's six Gets were its counters
(MemoryCurrent, TasksCurrent, CPUUsageNSec), which systemd reads from the unit's cgroup files
(and which a user manager on this hybrid host answers "not set": no v1 controller is delegated
to it); list and status now read memory.current, pids.current and cpu.stat themselves, only where
/sys/fs/cgroup is cgroup2 (manager/cgcount; TestCountersAgreeWithSystemd), under the manager's
ControlGroup, one Get. And every Get and answer crossed dbus-daemon twice: the bulk connection
now goes to the manager's private socket, where systemd answers directly. At 200 sessions,
interleaved, 20 lists each: 62-67 -> 40-43 ms (counters), then 74 -> 59 and 55 -> 39 ms
(private socket; a test run beside).

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

**The cgroup move, warmed (issue 32).** The rwsem's grace period is paid by whoever writes
first after a quiet moment, and the write need not move anything: this thread's own ID into
its own cgroup's cgroup.threads waits the same 5-7 ms and opens the window for the next ~12 ms
(a move then takes 0.07-0.11 ms). mosaic makes that write in the background at the start of
Open (and of the bus's Plan), overlapping the check, and again right before each
StartTransientUnit, so systemd's move (the tie scope's, the scope's, on 252 the service's
child) finds the window open. The write can never move the process: once systemd has moved it
into its tie scope the same write is refused (EOPNOTSUPP), and a PID written to cgroup.procs,
the obvious alternative, would have moved it back out. MOSAIC_TRACE marks in the 252 rig,
12 runs each 250 ms apart, before -> after: the tie scope 15.0 -> 7.5 and 15.2 -> 6.6 ms
(from a leaf scope of the user's, as a desktop terminal is: 13.5 -> 8.3, 18.5 -> 6.4); on 257:
16.7 -> 4.1, 12.4 -> 5.0. Interleaved with the binary before it and the peer, 30 runs each
250 ms apart (252, load ~1): mosaic run --scope 38.6 -> 27.8 ms (peer 28.8), mosaic run 54.6 ->
48.5 ms (peer 36.8), mosaic start 49.6 -> 38.6 ms (n=20: on 252 its service's forked child
moves itself); on 257 (loaded): 42.9 -> 36.2 (peer 33.5) and 95.0 -> 85.7 (peer 64.4). Again
later at load ~3, n=30: 252 run 69.9 -> 63.0 (peer 45.1), scope 43.7 -> 39.0 (peer 29.8), start
61.7 -> 50.7; 257 run 93.4 -> 81.2 (peer 65.4), scope 43.4 -> 36.1 (peer 33.1), start 71.3 -> 63.2
(so 257's service child, in this hybrid rig, waits too). A keeper that wrote every 2 ms for
40 ms instead did not shorten the tie scope's step further (medians 7.1/5.8 against 6.5/6.7 ms,
n=15 twice): what is left of it is systemd's work (its reply 1.3-1.7 ms, the job 1.2-6 ms). 100 mosaic
start at once: within the noise of a machine at load 10-40 (14 rounds each, median 3.16 s
before, 3.50 s after; in the 6 rounds in rotating order 3.69 and 3.50 s): each start adds two
writes, which cost ~0.1 ms where the window is open, and under that load it always is.

**Where the rest goes (issue 32, third round; the figures of this bench at 8ceb5ac).** The
scope target is met (1.06); the others are not, and each misses for a reason that a tuning of
today's design does not reach:
- mosaic run 47.8 ms against the hand-rolled service's 35.9 (1.33; 1.15 is 41.3 ms). Per phase
  (perf record -a of process events and cgroup moves, 252 rig, interleaved, medians ms; the peer
  in brackets): systemd's fork to the move 0.1-0.8 (11: the peer pays the grace period mosaic's
  warm-up hides), the namespace setup 7.1-8.3 (5.9-7.1: more mounts and properties), the exec
  shim 2.8-3.2 (none: a Go start is 1.8 ms before main), bwrap to the init 4.0-4.3 (bwrap to the
  command 3.3-4.1), the init to the command 2.9-3.3 (none), the command's exit to bwrap's
  1.4-2.0 (0.3). On the CLI's side: its own Go start (2.8-4 ms from spawn to main, systemd-run's
  ~1), the check 1.7, the claim 1.0, the tie scope 4.1 (a round trip and systemd's scope job;
  its move is warm), the end 2.4 + ~1. The two Go stages (~6 ms) and the tie (~4 ms) are the
  distance; the tie cannot be sent with the session (issue 31.13: a run killed before its move
  leaves an empty scope that never ends), and each stage is a check no other process can make.
- srt / mosaic run 7.15: 10x needs mosaic run at 34.2 ms, under the hand-rolled peer itself.
- mosaic start 39.7 against 39.0 (1.02): the same unit; what is left is the CLI's Go start and a
  named session's claim (2.7-3.9 ms in the trace: the ListUnitsByNames round trip that must come
  before its state is written, the kept home, the record) against systemd-run's C start.
- 100 mosaic start at once 2.26 s against 4.58 (0.49): CPU. Per start ~45 ms of CPU (2 CPUs),
  of which (perf record -u of 40 starts, the whole tree) systemd's executor child before it
  execs the shim 31%, the CLI 18%, systemd 15%, the shim 12%, bwrap 9%, the init 6%,
  dbus-daemon 4%. 0.3x is 1.37 s, ~27 ms of CPU per start: less than the unit's side alone
  (~35 ms), which the peer shares (its equivalent now binds what mosaic binds, and got cheaper:
  5.77 -> 4.58 s).

**A scope without an exec shim.** The scope path ran three Go programs before the command (the
CLI, the shim, the init) and built the sandbox only once systemd's job was done. mosaic now
starts bwrap itself with --info-fd (sandbox.Held): bwrap clones the init and reports its PID,
systemd adopts the init into the scope (StartTransientUnit with its PID; bwrap's monitor, which
only waits, stays with mosaic), and bwrap builds the whole sandbox (its namespaces, ~20 mounts)
during the grace period above. The scope check the shim made moved into the init, before
anything else (TestScopeInitOutsideRefused). Interleaved with the old binary and the peer, 30
runs each, 300 ms apart: mosaic run --scope 70.3 -> 61.4 ms (peer 47.6) and in another round
60.0 -> 53.6 (peer 37.2). At first bwrap held the init before its exec (--block-fd) until mosaic's
byte; now it runs it at once, and the init's own start (a Go program's, 4-5 ms) overlaps
systemd's job too: the init says on a socket pair that it is held (it keeps every signal from
then on, for the command), and waits there for mosaic's byte. Interleaved, 40 runs each 250 ms
apart: 50.9 -> 46.2 ms (mean; the bare peer 38.1, 1.21x). What is left on the path before the
move is bwrap's own start until its clone (2.6 ms, the network namespace ~0.9 ms of it).

**Where a scope run's time goes now** (perf sched, the two interleaved 250 ms apart, median of
15 runs, ms from the CLI's exec; the bare peer in brackets): bwrap exec'd 9.9 (systemd-run
execs bwrap once the job is done, 29.7), the init exec'd 18.9, the command exec'd 30.3 (35.6),
its end 31.0 (36.3), the init's 31.8, bwrap's 33.3, mosaic's 37.4 (36.8: systemd-run is bwrap).
With bwrap held on --block-fd the command was exec'd at 36.4 and mosaic ended at 42.5 against
the peer's 33.5. mosaic now runs the command sooner than the peer; what it adds comes after the
command's end: the init's and bwrap's exits (the PID and mount namespaces torn down, ~20 mounts
against the peer's ~10), the look at what the session created in the workspace, and the
removal of an unnamed run's state, which now run side by side (they were one after the other).

**Smaller steps.** Launch dials systemd while it checks the request (the connection is round
trips, the check CPU), and a scope run does not wait for the connection at all until it starts
its scope: its name, state directory and sandbox are made meanwhile (in the trace the wait left
is ~0.1 ms; main's binary against this one, interleaved, 40 runs each 300 ms apart: 58.1 ->
51.1 ms, peer 39.3). The end of a run makes the session's record again instead of
reading session.json back (~0.3 ms), and a scope writes no init-args file. Removing an unnamed
run's state directory stays on the path: 1.5-4 ms of renames and unlinks on the state
directory's disk (ext4 here), measured step by step with MOSAIC_TRACE marks; it now runs
beside the end's other work (systemd's news, the look at the workspace).

**Tried and not kept.** (1) Starting a scope's exec shim before the claim: os/exec's Start waits
until the child has exec'd, so the cost only moved. (2) AttachProcessesToUnit, to start the
scope with bwrap's PID before bwrap has cloned the init and add the init after: systemd takes it
only for an active unit with delegation, so it would cost Delegate=yes and a round trip after the
job, for the 2.6 ms above. (3) The manager's private socket for a start's own connection, as
systemd-run --user uses: no difference measured for one run, and 100 concurrent clients on it
get every signal (list's bulk Gets do use it, see above). (4) Not
subscribing: without Subscribe systemd still sends the job's end to its client, and with AddRef
on the unit its property changes, but neither was measurably faster in interleaved runs.
(5) GODEBUG containermaxprocs=0 (the runtime reads /proc/self/cgroup and mountinfo at every
start, ~4% of a stage's start in perf record): not measurable in wall clock here. (6) Binding
mosaic's and bwrap's binaries into the unit only where they lie under a hidden directory (the
first BindReadOnlyPaths costs systemd's child ~1-2 ms, more cost little): mosaic keeps the
notify socket's bind in any case, and in CI its binary lies in home.

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
have it), or a root-owned install; left for a later issue with that decided. Measured again this
round on an idle machine (perf stat -r 300, a stage with nothing to do): 4.3-4.5 ms elapsed for
mosaic against 3.8 for a 6.4 MB stage binary, 405 against 295 page faults; with the scope's init
now off the path, one stage on the service path is all it would shorten.

**Where a service run's time goes** (perf sched, median of 14 runs, ms from the CLI's exec; the
hand-rolled peer in brackets): systemd forks the unit's process 14.6 (11.9), which execs the
exec shim 40.2 (bwrap: 36.5); bwrap 46.6; the init 56.4; the command 61.5 (43.9); its end 62.7
(44.4); mosaic's 71.4 (49.1). So: mosaic's CLI reaches the fork 2.7 ms later (a Go start
against C, the request's checks, the state), the shim takes 6.4 ms (a Go start and the check of
systemd's layer), mosaic's bwrap 2.5 ms more than the peer's (twice the mounts, a network
namespace of its own inside systemd's), the init 5.1 ms (a Go start, the checks, the filter,
Landlock), and the end 4.3 ms more (the init's and bwrap's exits, the look at the workspace, the
state's removal). The two Go stages alone are 11.5 ms, 23% of the peer's whole run: the target
of 1.15x (~7 ms over the peer) cannot be met with an exec shim and an init, and neither can go
without a check going with it: the shim is the only process in systemd's layer before bwrap (it
checks that layer: its namespaces, the hidden home and runtime directory, the private /tmp,
no_new_privs, every bind's identity), and the init is the sandbox (the checks of bwrap's layer,
the syscall filter, Landlock, the signals, the reaping).

**100 starts at once is CPU.** perf record -a over 100 mosaic start processes (4.1 s, 2 CPUs,
11% idle): ~73 ms of CPU per start, of which systemd's forked child building the unit's
namespaces 21% (parsing mountinfo for ProtectSystem and the binds), the mosaic processes (CLI
and exec shim) 26%, bwrap 14%, the init 7%, systemd 9%, dbus-daemon 5%. At 2 CPUs the work of
systemd, its child and dbus-daemon alone is ~1.3 s per 100, bwrap's ~0.5 s: 1.5 s is out of
reach on this machine whatever mosaic's own processes cost.

**This machine is not the one the targets were set on.** Issue 21 measured its peers at 8.7 ms
(the bare scope peer) and 20.2 ms (the hand-rolled service); here they take 24-38 and 52-59 ms.
This bench's own history says the same: on 2026-11-29 (kernel build v657) the systemd-run
equivalent of one run took 26-35 ms and 100 mosaic starts at once 1.6-2.0 s; from 2026-11-30
(v782) the same tree's rows were 66-74 ms and 3.7-4.7 s (the systemd-run equivalent of the 100:
8.7-9.8 s). The ratios hold across the change; the absolute targets (1.5 s for 100 at once, 40
ms for list at 200) were set on a machine some 2.2-2.8x faster, and srt / the bare scope peer
is itself below 20 here (18.6 and 19.4 in two runs, back to back): no scope run can reach it.

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
