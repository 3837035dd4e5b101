package main

// fewerMessages is the analysis behind the D-Bus and process-start tables
// (issue 32), measured as whereTheTimeGoes is: counted, not timed. It is
// text, not a measurement of this run: update it with the code.
const fewerMessages = `
**What went (issue 32).** Counted with MOSAIC_TRACE=dbus on systemd 252 through the user bus,
every message of the command's connection, Hello and NameAcquired included. A run: 38 -> 26; a
scope run: 29 -> 18; a start: 66 -> 23.
- go-systemd's NewConnection waited for an AddMatch of every job end of every unit, which Connect
  then took back with a RemoveMatch: a round trip and three messages at every command. mosaic now
  calls systemd's few methods itself (manager/systemd.go). go-systemd's startJob also held one
  lock across the StartTransientUnit round trip, so starts from one process (the bus, this
  bench's 100 from one process) went one at a time; the new job waits hold no lock across a call.
- mosaic.slice's limits were read back with three Gets at every start and run; they are read
  only when no set-property drop-in of the slice says one is set.
- A start read its status after READY with 21 Gets (its unit's and its scope's Unit properties,
  its Service properties) and GetUnitProcesses: it now takes the state, the main process and the
  invocation from the PropertiesChanged systemd sent while it started (systemd sends a unit's
  pending changes before the job's end) and the limits from what it sent; only the processes are
  asked for.
- A CLI's run or start took back its match rules (four RemoveMatch for a run) just before its
  connection closed, when dbus-daemon drops them anyway.

**What stays, and why.** Hello; one Get of Version (the properties sent depend on it, and it
tells a bus with a live systemd on it from one without, before the private socket is tried);
Subscribe, sent without waiting (systemd puts a unit's signals on the bus only while a client is
subscribed); per unit one rule for its PropertiesChanged and one for its JobRemoved (no single
rule matches both without matching every unit's); StartTransientUnit; a start's GetUnitProcesses;
a run's ResetFailedUnit at the end (no reply asked for). The signals a
run receives are its unit's own (about six PropertiesChanged of some twenty properties each, and
its JobRemoved): what a run waits for.

**Where 100 starts at once go (perf record -a, 3.6 s, 2 CPUs, before the start's status went).**
By process: systemd's forked child building the unit's namespaces 23%, the mosaic processes (the
CLI and the exec shim) 17%, of which their own code only 6.5% (the rest is the kernel starting,
faulting in and ending them), bwrap 12%, the init 9%, systemd 8%, dbus-daemon 4%; other work on
the machine ~20%. In mosaic's own code the status after READY cost more than the start itself
(1.9% of all samples against 1.4%) and package initialisation 2.5% (patchcheck's index-line
pattern alone 1.3 ms per process: it is compiled at first use now). The peer runs the same unit,
shim, bwrap and init: what separates the two rows is the client, and at 2 CPUs the unit's own
work (systemd, its child, bwrap, the stages) is most of mosaic's figure.

**Where the CLI's own time goes (perf record of 20 mosaic start, user CPU).** The CLI 86% and git
11% (the user's git identity, read at every start: one process start of the five a run makes on
its side). In the CLI: godbus reading and decoding messages 15%, sending 6%; urfave/cli's flag
lookups 8% (each IsSet looks every flag's names up again through a regexp: quadratic in the
command's flags); the plan 8%; the claim and the state directory 8% (the records' JSON 5%);
package initialisation 6%.
`
