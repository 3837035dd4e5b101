package request

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"mosaic/internal/errcode"
	"mosaic/units"
)

// ConfigFile is the user's settings for mosaic, in the config directory
// (~/.config/mosaic/mosaic.conf): KEY = VALUE lines, `#` comments. The keys
// are the default limits (units.SessionDefaults and SliceDefaults say the
// built-in ones; "infinity" lifts one):
//
//	memory-max, tasks-max, cpu-quota                 each session's, under a profile's and a flag's
//	slice-memory-max, slice-tasks-max, slice-cpu-quota  mosaic.slice's: every session together
//
// and workspace = clone or direct: the sessions' workspace mode when
// neither the flags (--clone) nor the profile (Workspace=) say.
const ConfigFile = "mosaic.conf"

// Config is what the user's ConfigFile says.
type Config struct {
	Session   units.Limits
	Slice     units.Limits
	Workspace string // ModeClone, ModeDirect or ""
}

// ReadConfig reads the user's ConfigFile; one that does not exist says
// nothing. Only a regular file is read, without blocking.
func ReadConfig(p Paths) (Config, error) {
	var c Config
	path := filepath.Join(p.config(), "mosaic", ConfigFile)
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if os.IsNotExist(err) {
		return c, nil
	}
	if err != nil {
		return c, errcode.BadConfig.New("%s: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return c, errcode.BadConfig.New("%s is not a regular file", path)
	}
	var session, slice units.LimitStrings
	keys := map[string]*string{
		"memory-max": &session.MemoryMax, "tasks-max": &session.TasksMax, "cpu-quota": &session.CPUQuota, "tmp-size": &session.TmpSize, "home-size": &session.HomeSize,
		"slice-memory-max": &slice.MemoryMax, "slice-tasks-max": &slice.TasksMax, "slice-cpu-quota": &slice.CPUQuota,
		"workspace": &c.Workspace,
	}
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		dst := keys[strings.TrimSpace(k)]
		if !ok || dst == nil {
			return c, errcode.BadConfig.New("%s:%d: %q is not KEY = VALUE with a known key (memory-max, tasks-max, cpu-quota, slice-memory-max, slice-tasks-max, slice-cpu-quota, workspace)", path, n, strings.TrimSpace(line))
		}
		*dst = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return c, errcode.BadConfig.New("%s: %w", path, err)
	}
	if c.Workspace != "" && c.Workspace != ModeClone && c.Workspace != ModeDirect {
		return c, errcode.BadConfig.New("%s: workspace = %s: use clone or direct", path, c.Workspace)
	}
	if c.Session, err = session.Parse(); err != nil {
		return c, errcode.BadConfig.New("%s: %w", path, err)
	}
	if c.Slice, err = slice.Parse(); err != nil {
		return c, errcode.BadConfig.New("%s: slice-%w", path, err)
	}
	return c, nil
}
