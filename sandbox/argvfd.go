package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// bwrap refuses more than 9,000 arguments in all (its MAX_ARGS counts the
// command's too, and --args FD counts against the same total), so the init's
// own arguments, the command's among them, do not go through bwrap's argv:
// the exec shim writes them into a sealed memfd the init inherits, and the
// init reads them back (InitArgvFD). bwrap is left with its own options and
// "/run/mosaic/init init --argv-fd N".

// InitArgvFD is the init's option naming the descriptor its arguments are in.
const InitArgvFD = "--argv-fd"

// BwrapMaxArgs is bwrap's limit on its arguments (MAX_ARGS in bubblewrap.c).
const BwrapMaxArgs = 9000

// moveInitArgv returns bwrap's argv with the init's arguments moved into a
// memfd; an argv without the init is returned as it is.
func moveInitArgv(argv []string) ([]string, error) {
	for i := 0; i+2 < len(argv); i++ {
		if argv[i] != "--" || argv[i+1] != InitPath || argv[i+2] != "init" {
			continue
		}
		var b bytes.Buffer
		for _, a := range argv[i+3:] {
			b.WriteString(a)
			b.WriteByte(0)
		}
		// Not close-on-exec: bwrap passes it on to the init, which closes it.
		fd, err := unix.MemfdCreate("mosaic-init-argv", unix.MFD_ALLOW_SEALING)
		if err != nil {
			return nil, fmt.Errorf("cannot make the init's argument file: %v", err)
		}
		f := os.NewFile(uintptr(fd), "mosaic-init-argv")
		if _, err := f.Write(b.Bytes()); err != nil {
			f.Close()
			return nil, fmt.Errorf("cannot write the init's arguments: %v", err)
		}
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
		if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
		// f must outlive the exec: keep the descriptor from the finalizer.
		keep = append(keep, f)
		return append(argv[:i+3:i+3], InitArgvFD, strconv.Itoa(fd)), nil
	}
	return argv, nil
}

// keep holds the files whose descriptors must survive until exec.
var keep []*os.File

// readInitArgv reads the init's arguments from descriptor fd (as the shim
// wrote them) and closes it, so that the command never inherits it.
func readInitArgv(fdArg string) ([]string, error) {
	fd, err := strconv.Atoi(fdArg)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("bad %s %q", InitArgvFD, fdArg)
	}
	f := os.NewFile(uintptr(fd), "mosaic-init-argv")
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("cannot read the init's arguments: %v", err)
	}
	if len(b) == 0 || b[len(b)-1] != 0 {
		return nil, fmt.Errorf("the init's arguments are cut short")
	}
	return strings.Split(string(b[:len(b)-1]), "\x00"), nil
}
