// Package inside is the code that runs inside a session, in the stage
// binary (cmd/mosaic-stage) and never in mosaic on the host: the exec shim
// (a service's main process, in its unit: it checks systemd's layer
// against the host's promise, makes the network device, and becomes
// bwrap: shim.go, tundev.go, capabilities.go), the init (PID 1 inside
// bwrap, or the unit's command under --sandbox landlock: init.go), and
// what the init does before and after the command: the guard (its check
// of bwrap's layer, and the shim's of systemd's: guard.go), the Landlock
// ruleset and the syscall filter applied to the command (landlock.go,
// seccomp.go), the relay to the egress proxy and the network device's
// start (relay.go, tundev.go), the home loaded into its tmpfs and saved
// back to the session's state directory (homestore.go, homecopy.go and
// its neighbours). mosaic-net, which the init starts inside the sandbox,
// takes its device and filter from here too.
//
// What the host writes for it (the promise, the shim's and the init's
// command lines, the Landlock policy, the syscall filter's rows, the
// home's report) is package sandbox, which this one imports; mosaic links
// sandbox and not this package (TestStageLinksLittle).
package inside
