package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
	"mosaic/sandbox/inside"
)

// hardening measures, in this process, what each hardening step of a
// session start costs on its own (issue 21: a check may get cheaper, never
// weaker, and each shows its cost): reading the host's facts the guard
// checks against (mosaic, every start), decoding the promise (shim and
// init), building the syscall filter (init), a system call under it (the
// command, every call), and starting the command plain against starting it
// in the Landlock scoping domain (init). The figures are CPU work of a few
// microseconds to a millisecond: the per-step means of many iterations.
func (b *bench) hardening(r *Report) {
	progress("the cost of each hardening step")
	home, _ := os.UserHomeDir()
	rt := os.Getenv("XDG_RUNTIME_DIR")
	add := func(name, command string, n int, f func() error) {
		s, err := measure(name, command, n, f)
		if err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: not measured: %v", name, err))
			return
		}
		r.Hardening = append(r.Hardening, s)
	}
	add("guard: the host's facts (namespaces, home, /tmp, /run, /dev/shm identities)", "sandbox.HostPromise", 1000, func() error {
		sandbox.HostPromise(home, rt, false).Encode()
		return nil
	})
	enc := sandbox.HostPromise(home, rt, false).Encode()
	add("guard: decoding the promise (exec shim, init)", "sandbox.DecodePromise", 1000, func() error {
		_, err := sandbox.DecodePromise(enc)
		return err
	})
	add("syscall filter: building it (init)", "inside.SyscallFilter", 1000, func() error {
		_, err := inside.SyscallFilter(nil)
		return err
	})
	for _, filtered := range []bool{false, true} {
		name := "a system call (getppid), no filter"
		if filtered {
			name = "a system call (getppid), under the syscall filter"
		}
		if ns, err := syscallCost(filtered); err == nil {
			r.Hardening = append(r.Hardening, Stat{Name: name, Command: "mosaic-bench syscall-child", N: syscallLoops, MeanMs: ns / 1e6, MedianMs: ns / 1e6})
		} else {
			r.Notes = append(r.Notes, name+": not measured: "+err.Error())
		}
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer null.Close()
	start := func(scoped bool) func() error {
		return func() error {
			var rs *inside.LandlockRuleset
			if scoped {
				var err error
				if rs, err = inside.ScopeRuleset(); err != nil {
					return err
				}
			}
			p, err := inside.StartRestricted(rs, "/usr/bin/true", []string{"true"}, &os.ProcAttr{Files: []*os.File{null, null, null}})
			if err != nil {
				return err
			}
			_, err = p.Wait()
			return err
		}
	}
	add("starting the command (/usr/bin/true to its exit), plain", "inside.StartRestricted(nil)", 200, start(false))
	if sandbox.LandlockABI() >= sandbox.LandlockMinABI {
		add("starting the command in the Landlock scoping domain", "inside.StartRestricted(ScopeRuleset)", 200, start(true))
	} else {
		r.Notes = append(r.Notes, "Landlock scoping not measured: the kernel lacks Landlock ABI 6")
	}
}

const syscallLoops = 1_000_000

// syscallCost runs this binary's syscall-child, which times getppid, with or
// without the session's syscall filter installed (which cannot be undone, so
// never in this process), and returns nanoseconds per call.
func syscallCost(filtered bool) (float64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, "syscall-child")
	cmd.Env = append(os.Environ(), "MOSAIC_BENCH_FILTERED="+strconv.FormatBool(filtered))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, out)
	}
	return strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
}

// syscallChild is the child syscallCost runs.
func syscallChild() error {
	if os.Getenv("MOSAIC_BENCH_FILTERED") == "true" {
		if err := inside.InstallSyscallFilter(nil); err != nil {
			return err
		}
	}
	t := time.Now()
	for i := 0; i < syscallLoops; i++ {
		unix.Getppid()
	}
	fmt.Println(float64(time.Since(t).Nanoseconds()) / syscallLoops)
	return nil
}
