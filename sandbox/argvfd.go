package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"mosaic/internal/regfile"
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

// InitArgsAside returns bwrap's argv for shim s, with the init's arguments
// in a memfd the init inherits: read from s.InitArgs, or moved there from
// the end of s.Args. inline is bwrap's argv with the init's arguments in
// place, as InitEnv reads the names the init passes on from it.
func InitArgsAside(s Shim) (argv, inline []string, err error) {
	argv = s.Args
	if s.InitArgs != "" {
		n := len(argv)
		if !endsInInit(argv) {
			return nil, nil, fmt.Errorf("--init-args without the init at the end of bwrap's arguments")
		}
		b, err := regfile.Read(s.InitArgs, true, maxInitArgs)
		if err != nil {
			return nil, nil, fmt.Errorf("cannot read the init's arguments: %w", err)
		}
		fd, err := sealed(b)
		if err != nil {
			return nil, nil, err
		}
		inline = append(argv[:n:n], strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")...)
		return append(argv[:n:n], InitArgvFD, strconv.Itoa(fd)), inline, nil
	}
	for i := 0; i+2 < len(argv); i++ {
		if !initAt(argv, i) {
			continue
		}
		fd, err := sealed(EncodeInitArgs(argv[i+3:]))
		if err != nil {
			return nil, nil, err
		}
		return append(argv[:i+3:i+3], InitArgvFD, strconv.Itoa(fd)), argv, nil
	}
	return argv, argv, nil
}

// initAt reports whether bwrap's argv runs mosaic's init from index i on:
// bwrap's "--", InitPath, then "init".
func initAt(argv []string, i int) bool {
	return i >= 0 && i+2 < len(argv) && argv[i] == "--" && argv[i+1] == InitPath && argv[i+2] == "init"
}

// endsInInit reports whether bwrap's argv ends in mosaic's init with its
// arguments elsewhere (in a file or a memfd).
func endsInInit(argv []string) bool { return initAt(argv, len(argv)-3) }

// maxInitArgs bounds the init's argument file: more could not be exec'd.
const maxInitArgs = 4 << 20

// EncodeInitArgs is the content of an init argument file: each argument
// followed by a NUL.
func EncodeInitArgs(args []string) []byte {
	var b bytes.Buffer
	for _, a := range args {
		b.WriteString(a)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// sealed returns a memfd holding data, sealed against change, at offset 0
// and not close-on-exec: bwrap passes it on to the init, which closes it.
func sealed(data []byte) (int, error) {
	f, err := sealedFile(data)
	if err != nil {
		return -1, err
	}
	// f must outlive the exec: keep the descriptor from the finalizer.
	keep = append(keep, f)
	return int(f.Fd()), nil
}

// sealedFile is sealed's memfd as a file, for a caller that hands it to a
// child it starts (ExtraFiles) and then closes it.
func sealedFile(data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("mosaic-init-argv", unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("cannot make the init's argument file: %w", err)
	}
	f := os.NewFile(uintptr(fd), "mosaic-init-argv")
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot write the init's arguments: %w", err)
	}
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// keep holds the files whose descriptors must survive until exec.
var keep []*os.File

// ReadInitArgv reads the init's arguments from descriptor fd (as the shim
// wrote them) and closes it, so that the command never inherits it.
func ReadInitArgv(fdArg string) ([]string, error) {
	fd, err := strconv.Atoi(fdArg)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("bad %s %q", InitArgvFD, fdArg)
	}
	f := os.NewFile(uintptr(fd), "mosaic-init-argv")
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("cannot read the init's arguments: %w", err)
	}
	if len(b) == 0 || b[len(b)-1] != 0 {
		return nil, fmt.Errorf("the init's arguments are cut short")
	}
	return strings.Split(string(b[:len(b)-1]), "\x00"), nil
}
