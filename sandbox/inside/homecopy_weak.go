package inside

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// naiveDir is the weakened build's copy of a home (tests only): the copy
// a plain cp -rL would make. It follows every symlink, opens whatever it
// finds (a FIFO hangs it), copies each link of a file and each byte of a
// sparse one, and knows no budget; each of the attacks the save refuses is
// first shown to work against it.
func (c *treeCopy) naiveDir(src, dst int) error {
	return c.naivePath(fdPath(src), fdPath(dst), 0)
}

func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

func (c *treeCopy) naivePath(from, to string, depth int) error {
	entries, err := os.ReadDir(from)
	if err != nil || depth > 16 {
		return err
	}
	for _, e := range entries {
		src, dst := filepath.Join(from, e.Name()), filepath.Join(to, e.Name())
		fi, err := os.Stat(src) // follows a symlink
		if err != nil {
			continue
		}
		if fi.IsDir() {
			if err := os.Mkdir(dst, 0o700); err != nil && !os.IsExist(err) {
				return err
			}
			if err := c.naivePath(src, dst, depth+1); err != nil {
				return err
			}
			continue
		}
		in, err := os.Open(src)
		if err != nil {
			continue
		}
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err == nil {
			var n int64
			n, err = io.Copy(onlyWriter{out}, in) // no copy_file_range: every byte written
			c.stats.Files++
			c.stats.Bytes += n
			out.Close()
		}
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// onlyWriter hides the file's ReadFrom, so that io.Copy writes each byte.
type onlyWriter struct{ io.Writer }
