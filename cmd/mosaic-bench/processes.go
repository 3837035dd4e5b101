package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcessCount is how many programs one command started, to its end
// (issue 32: fewer process starts per session): the ones it started
// itself and, for a service, the ones the user manager started for it.
type ProcessCount struct {
	What    string `json:"what"`
	Command int    `json:"command"` // the command's own tree (the CLI, its children)
	Manager int    `json:"manager"` // the user manager's children meanwhile (the unit's)
	// Programs are the programs, in the order they were executed.
	Programs []string `json:"programs"`
}

// processStarts counts the successful execve calls of argv's process tree
// and of the user manager's children while argv runs, with strace: the
// manager is this user's own process (ptrace needs no privilege where no
// Yama policy forbids it), and its forks are followed as argv's are. The
// strace on the manager slows it: these runs are never timed.
func processStarts(what string, argv []string) (ProcessCount, error) {
	pc := ProcessCount{What: what}
	strace, err := exec.LookPath("strace")
	if err != nil {
		return pc, fmt.Errorf("no strace to count process starts with")
	}
	pid, err := userManagerPID()
	if err != nil {
		return pc, err
	}
	dir, err := os.MkdirTemp("", "mosaic-bench-exec-")
	if err != nil {
		return pc, err
	}
	defer os.RemoveAll(dir)
	// -ff: a file per process (FILE.PID), so that no call is split
	// across lines by another process's ("<unfinished ...>").
	mgrOut, cmdOut := filepath.Join(dir, "manager"), filepath.Join(dir, "command")
	mgr := exec.Command(strace, "-ff", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", mgrOut, "-p", strconv.Itoa(pid))
	if err := mgr.Start(); err != nil {
		return pc, err
	}
	defer mgr.Wait()
	time.Sleep(500 * time.Millisecond) // attached (strace -qq says nothing)
	runErr := runCmd(append([]string{strace, "-ff", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", cmdOut, "--"}, argv...))
	time.Sleep(300 * time.Millisecond) // the unit's last stages (ExecStopPost)
	_ = mgr.Process.Signal(syscall.SIGINT)
	_ = mgr.Wait()
	if runErr != nil {
		return pc, runErr
	}
	var progs []string
	if pc.Command, progs, err = execs(cmdOut); err != nil {
		return pc, err
	}
	pc.Programs = append(pc.Programs, progs...)
	if pc.Manager, progs, err = execs(mgrOut); err != nil {
		return pc, err
	}
	pc.Programs = append(pc.Programs, progs...)
	return pc, nil
}

// execs counts the successful execve calls in strace -ff's files of prefix
// (one per process, in the order of their PIDs) and names their programs
// (the first argument, shortened to its base name).
func execs(prefix string) (int, []string, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil {
		return 0, nil, err
	}
	sort.Slice(files, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Ext(files[i])[1:])
		b, _ := strconv.Atoi(filepath.Ext(files[j])[1:])
		return a < b
	})
	var text strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, nil, err
		}
		text.Write(b)
	}
	n := 0
	var progs []string
	for _, l := range strings.Split(text.String(), "\n") {
		if !strings.Contains(l, "execve(") || !strings.HasSuffix(strings.TrimSpace(l), "= 0") {
			continue
		}
		n++
		if i := strings.Index(l, "execve(\""); i >= 0 {
			rest := l[i+len("execve(\""):]
			if j := strings.IndexByte(rest, '"'); j >= 0 {
				progs = append(progs, filepath.Base(rest[:j]))
			}
		}
	}
	return n, progs, nil
}

// userManagerPID is the PID of this user's systemd manager (systemd
// --user, run as this user).
func userManagerPID() (int, error) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(fmt.Sprintf("/proc/%d", pid), &st) != nil || int(st.Uid) != os.Getuid() {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if args := strings.Split(string(b), "\x00"); len(args) > 1 && filepath.Base(args[0]) == "systemd" && args[1] == "--user" {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("cannot find this user's systemd manager (systemd --user) in /proc")
}
