package sandbox

import (
	"encoding/json"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Promise is what a session's layers must differ in from the outside they
// were made in. mosaic fills it from the host when it starts a session; the
// exec shim replaces the namespaces with the unit's before bwrap runs.
type Promise struct {
	NS         map[string]string `json:"ns"`      // "user", "mnt", "pid" -> the outside's namespace (readlink /proc/self/ns/X)
	Home       string            `json:"home"`    // the user's home path
	HomeID     string            `json:"home_id"` // its device:inode outside
	TmpID      string            `json:"tmp_id"`  // /tmp's device:inode outside
	RuntimeDir string            `json:"runtime"` // $XDG_RUNTIME_DIR
	PIDs       bool              `json:"pids"`    // the unit has a PID namespace of its own (PrivatePIDs)
	// Scope, for a session that is a scope, is the end of the cgroup path
	// the init must be in ("/mosaic.slice/mosaic-NAME.scope"): a scope has
	// no unit layer to check, only the cgroup systemd moved it into.
	Scope string `json:"scope,omitempty"`
	// Net says the session has a network namespace of its own (network
	// none or allow): a service's unit's (PrivateNetwork), which bwrap
	// shares, or a scope's bwrap's.
	Net bool `json:"net,omitempty"`
	// ShmID is the host's /dev/shm device:inode, which a --sandbox landlock
	// session must not see (systemd covers it).
	ShmID string `json:"shm_id,omitempty"`
	RunID string `json:"run_id,omitempty"` // and /run's, likewise
	// Binds are the workspace's and every --ro/--rw path's identity as
	// mosaic checked them: each layer must have mounted exactly these.
	Binds []BindID `json:"binds,omitempty"`
}

// PromiseEnv carries the promise from the exec shim to the init.
const PromiseEnv = "MOSAIC_PROMISE"

// HostPromise reads the facts of the host (the caller of mosaic start).
func HostPromise(home, runtimeDir string, privatePIDs bool) Promise {
	return Promise{NS: Namespaces(), Home: home, HomeID: FileID(home), TmpID: FileID("/tmp"), RuntimeDir: runtimeDir, PIDs: privatePIDs, ShmID: FileID("/dev/shm"), RunID: FileID("/run")}
}

// Encode is the promise as one argument.
func (p Promise) Encode() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// DecodePromise reads an encoded promise.
func DecodePromise(s string) (Promise, error) {
	var p Promise
	if err := json.Unmarshal([]byte(s), &p); err != nil || p.NS == nil {
		return p, fmt.Errorf("unreadable sandbox promise %q", s)
	}
	return p, nil
}

// Namespaces are this process's user, mount, PID and network namespaces
// (readlink /proc/self/ns/X), by kind.
func Namespaces() map[string]string {
	ns := map[string]string{}
	for _, n := range []string{"user", "mnt", "pid", "net"} {
		if v, err := os.Readlink("/proc/self/ns/" + n); err == nil {
			ns[n] = v
		}
	}
	return ns
}

// FileID is a path's device:inode, or "" where it does not exist.
func FileID(path string) string {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}
