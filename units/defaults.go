package units

import (
	"math"
	"runtime"

	"golang.org/x/sys/unix"
)

// Default limits: no session is unbounded unless the user says so. A
// runaway agent (a fork bomb, a memory leak, a build on every core) must not
// take the machine down; the defaults leave the rest of the desktop room.
// Each is overridden per session (--memory-max, --tasks-max, --cpu-quota),
// per profile (MemoryMax=, TasksMax=, CPUQuota= in [Profile]) and in the
// user's mosaic.conf, in that order of precedence; "infinity" lifts one.
//
//	one session      MemoryMax 1/2 of RAM, TasksMax 4096, CPUQuota 3/4 of the CPUs
//	mosaic.slice     MemoryMax 3/4 of RAM, TasksMax 16384, CPUQuota 9/10 of the CPUs
//	an egress proxy  MemoryMax 256M, TasksMax 64, CPUQuota 100%
//	the bus          MemoryMax 256M, TasksMax 256, CPUQuota 100% (its unit file)

// Infinity is a limit lifted on purpose (systemd's "infinity", UINT64_MAX
// on D-Bus), as opposed to zero, not set.
const Infinity = math.MaxUint64

// Host is what the defaults are computed from.
type Host struct {
	RAM  uint64 // bytes of physical memory
	CPUs int
}

// ThisHost reads the host's memory and CPUs.
func ThisHost() Host {
	var si unix.Sysinfo_t
	h := Host{CPUs: runtime.NumCPU()}
	if unix.Sysinfo(&si) == nil {
		h.RAM = uint64(si.Totalram) * uint64(si.Unit)
	}
	return h
}

// SessionDefaults are one session's default limits on h.
func SessionDefaults(h Host) Limits {
	return Limits{MemoryMax: h.RAM / 2, TasksMax: 4096, CPUQuota: cpuShare(h, 75), TmpSize: DefaultTmpSize, HomeSize: DefaultHomeSize}
}

// DefaultTmpSize bounds a session's /tmp unless --tmp-size, its profile's
// TmpSize= or mosaic.conf says otherwise: a session that fills it gets
// ENOSPC there, and nothing else of the user's is touched.
const DefaultTmpSize uint64 = 1 << 30

// DefaultHomeSize bounds a session's home (a tmpfs, in memory, as /tmp)
// unless --home-size, its profile's HomeSize= or mosaic.conf says
// otherwise. 2 GiB holds what the agents keep there (Claude Code's and
// Codex's state and caches, a language's package cache: some hundreds of
// MiB) with room to spare, and is still far below the session's default
// MemoryMax (half the RAM) on the machines agents run on.
const DefaultHomeSize uint64 = 2 << 30

// SliceDefaults are mosaic.slice's default limits on h: every session
// together.
func SliceDefaults(h Host) Limits {
	return Limits{MemoryMax: h.RAM / 4 * 3, TasksMax: 16384, CPUQuota: cpuShare(h, 90)}
}

// EgressLimits are an egress proxy's limits: it relays bytes, no more.
var EgressLimits = Limits{MemoryMax: EgressMemoryMax, TasksMax: EgressTasksMax, CPUQuota: 100}

// cpuShare is percent of all of h's CPUs, as a quota of one CPU's percent,
// at least one CPU.
func cpuShare(h Host, percent int) uint64 {
	q := uint64(h.CPUs * percent)
	if q < 100 {
		q = 100
	}
	return q
}

// Or fills each limit l does not set from d.
func (l Limits) Or(d Limits) Limits {
	if l.MemoryMax == 0 {
		l.MemoryMax = d.MemoryMax
	}
	if l.TasksMax == 0 {
		l.TasksMax = d.TasksMax
	}
	if l.CPUQuota == 0 {
		l.CPUQuota = d.CPUQuota
	}
	if l.RuntimeMax == 0 {
		l.RuntimeMax = d.RuntimeMax
	}
	if l.TmpSize == 0 {
		l.TmpSize = d.TmpSize
	}
	if l.HomeSize == 0 {
		l.HomeSize = d.HomeSize
	}
	return l
}
