package inside

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
)

// BPF opcodes (linux/bpf_common.h) and the layout of struct seccomp_data
// (linux/seccomp.h): int nr; __u32 arch; __u64 instruction_pointer;
// __u64 args[6]. Both architectures mosaic builds a filter for are
// little-endian: an argument's low 32 bits come first.
const (
	bpfLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K

	offNr   = 0
	offArch = 4
	offArgs = 16

	retAllow = unix.SECCOMP_RET_ALLOW
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
)

// filterProg assembles a classic BPF program whose jumps go to labels.
type filterProg struct {
	insns  []unix.SockFilter
	jumps  map[int][2]string // instruction index → labels of jt, jf ("" = next)
	labels map[string]int
}

func (p *filterProg) emit(code uint16, k uint32) {
	p.insns = append(p.insns, unix.SockFilter{Code: code, K: k})
}

func (p *filterProg) jump(code uint16, k uint32, jt, jf string) {
	p.jumps[len(p.insns)] = [2]string{jt, jf}
	p.emit(code, k)
}

func (p *filterProg) label(name string) { p.labels[name] = len(p.insns) }

func (p *filterProg) resolve() ([]unix.SockFilter, error) {
	for i, j := range p.jumps {
		for side, l := range j {
			if l == "" {
				continue
			}
			at, ok := p.labels[l]
			off := at - i - 1
			if !ok || off < 0 || off > 255 {
				return nil, fmt.Errorf("syscall filter: jump from %d to %q out of range", i, l)
			}
			if side == 0 {
				p.insns[i].Jt = uint8(off)
			} else {
				p.insns[i].Jf = uint8(off)
			}
		}
	}
	return p.insns, nil
}

// SyscallFilter is the session's seccomp program for this architecture,
// without the rows named in allow: a call from another architecture's ABI
// (i386's int 0x80 on x86_64, whose numbers differ) or from x32 gets EPERM,
// so that no table of numbers can be sidestepped; each denied call gets
// EPERM; everything else is allowed.
func SyscallFilter(allow []string) ([]unix.SockFilter, error) {
	if auditArch == 0 {
		return nil, fmt.Errorf("mosaic has no syscall filter for this architecture")
	}
	lifted := map[string]bool{}
	for _, n := range allow {
		lifted[n] = true
	}
	p := &filterProg{jumps: map[int][2]string{}, labels: map[string]int{}}
	p.emit(bpfLdAbsW, offArch)
	p.jump(bpfJeqK, auditArch, "", "deny")
	p.emit(bpfLdAbsW, offNr)
	if x32Bit != 0 {
		p.jump(bpfJgeK, x32Bit, "deny", "")
	}
	var narrowed []sandbox.SyscallRule
	argRule := map[uint32]bool{}
	for _, r := range sandbox.SyscallRules {
		if lifted[r.Name] && !r.Fixed {
			continue
		}
		if r.Arg != nil {
			narrowed = append(narrowed, r)
			continue
		}
		for _, s := range r.Syscalls {
			if nr, ok := syscallNumbers[s]; ok {
				p.jump(bpfJeqK, nr, "deny", "")
			}
		}
	}
	// Each narrowed call is decided in a block of its own, which ends the
	// program (its argument replaced the number in the accumulator); so a
	// call may be narrowed by one rule only.
	for i, r := range narrowed {
		for j, s := range r.Syscalls {
			nr, ok := syscallNumbers[s]
			if !ok {
				continue
			}
			if argRule[nr] {
				return nil, fmt.Errorf("syscall filter: %s narrowed by two rules", s)
			}
			argRule[nr] = true
			next := fmt.Sprintf("next-%d-%d", i, j)
			p.jump(bpfJeqK, nr, "", next)
			p.emit(bpfLdAbsW, uint32(offArgs+8*r.Arg.Index))
			match, rest := "deny", "allow"
			if r.Arg.Unless {
				match, rest = "allow", "deny"
			}
			for _, v := range r.Arg.Values {
				p.jump(bpfJeqK, v, match, "")
			}
			p.jump(bpfJeqK, 0, rest, rest) // an unconditional jump within reach
			p.label(next)
		}
	}
	p.label("allow")
	p.emit(bpfRetK, retAllow)
	p.label("deny")
	p.emit(bpfRetK, retEPERM)
	return p.resolve()
}

// InstallSyscallFilter puts the calling process, every thread of it
// (SECCOMP_FILTER_FLAG_TSYNC: the Go runtime's threads too) and all it
// starts from now on under SyscallFilter(allow). It is irreversible.
func InstallSyscallFilter(allow []string) error {
	if weakened {
		return nil
	}
	if err := sandbox.CheckSeccompAllow(allow); err != nil {
		return err
	}
	insns, err := SyscallFilter(allow)
	if err != nil {
		return err
	}
	// A filter without CAP_SYS_ADMIN needs no_new_privs (bwrap and the
	// unit's NoNewPrivileges set it already).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot set no_new_privs for the syscall filter: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(insns)), Filter: &insns[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("cannot install the syscall filter: %w", errno)
	}
	if r != 0 {
		return fmt.Errorf("cannot install the syscall filter: thread %d could not take it", r)
	}
	return nil
}
