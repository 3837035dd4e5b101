package sandbox

// ModeRow is one line of what --sandbox landlock confines, beside what
// bwrap's layer does: what `mosaic doctor` and `mosaic status` show, so
// that nobody takes the mode for what it is not.
type ModeRow struct {
	What     string `json:"what"`
	Bwrap    string `json:"bwrap"`
	Landlock string `json:"landlock"`
	// Weaker says the landlock mode confines less here than bwrap's.
	Weaker bool `json:"weaker,omitempty"`
}

// LandlockRows compare the two modes, row by row. systemd's layer (the
// unit's properties) is under both.
var LandlockRows = []ModeRow{
	{What: "your home", Bwrap: "never mounted; the session's own HOME appears at its path",
		Landlock: "hidden by systemd's tmpfs; HOME is the session's own directory at its path on disk (under ~/.local/state/mosaic)"},
	{What: "writes", Bwrap: "workspace, own home, own /tmp, --rw paths (binds)",
		Landlock: "the same, by Landlock write rules (its own state directory, which systemd binds, stays read-only)"},
	{What: "host-executed files", Bwrap: ".git/config, .git/hooks, .vscode, ... bound read-only over the workspace",
		Landlock: "the same, bound read-only by systemd's layer (a Landlock rule cannot keep a path below the workspace from being written)"},
	{What: "reads", Bwrap: "only what is bound: system dirs, binds",
		Landlock: "system dirs, /etc, /proc and the binds; other paths of the unit's view (/var, /opt, /run) can be named and stat'ed but not read", Weaker: true},
	{What: "processes", Bwrap: "PID namespace and private /proc: no host process visible",
		Landlock: "before systemd 257 the host's /proc: every process and command line of the host is visible; from 257 a PID namespace of its own (PrivatePIDs); signals outside the session fail (Landlock scope)", Weaker: true},
	{What: "IPC", Bwrap: "IPC namespace: no host SysV IPC or POSIX message queue",
		Landlock: "the host's SysV IPC and message queues are reachable (systemd's PrivateIPC fails in a 252 user manager)", Weaker: true},
	{What: "/dev", Bwrap: "a private /dev with the basic nodes",
		Landlock: "the host's /dev visible by name; only null, zero, full, random, urandom, tty, ptmx and pts usable; /dev/shm an empty tmpfs", Weaker: true},
	{What: "/sys, /run", Bwrap: "none", Landlock: "/run an empty tmpfs (no system bus) but for the session's own runtime binds; /sys an empty tmpfs, or from systemd 257 its own sysfs, unreadable (no Landlock read rule), with the cgroup tree under an inaccessible directory"},
	{What: "network", Bwrap: "none/allow: a network namespace of its own (systemd's and bwrap's)",
		Landlock: "none/allow: systemd's network namespace, and TCP connect only to the egress relay (allow) or nowhere (none); UDP is not covered by Landlock"},
	{What: "abstract sockets", Bwrap: "none/allow: its own network namespace; every mode: Landlock scope (ABI 6+)",
		Landlock: "Landlock scope"},
	{What: "user bus, systemd", Bwrap: "hidden twice: systemd's tmpfs over the runtime dir, and not bound by bwrap",
		Landlock: "hidden once, by systemd's tmpfs over the runtime dir (checked from inside before the command runs)", Weaker: true},
	{What: "nested sandboxes", Bwrap: "an agent's own bwrap works inside",
		Landlock: "an agent's own bwrap cannot mount under Landlock's filesystem rules: run the agent without its sandbox", Weaker: true},
	{What: "fail-open guard", Bwrap: "the init checks bwrap's namespaces and binds",
		Landlock: "the init checks systemd's covers and refuses (125) when the ruleset cannot apply at ABI 6"},
}
