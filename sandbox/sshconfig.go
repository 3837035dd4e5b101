package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// SSHConfigDirHost is the directory of the system's ssh client
// configuration snippets, which OpenSSH's /etc/ssh/ssh_config (Debian,
// Ubuntu, Fedora, Arch) includes: `Include /etc/ssh/ssh_config.d/*.conf`.
const SSHConfigDirHost = "/etc/ssh/ssh_config.d"

// SSHConfigCopy is why ssh works inside a session whose host has a
// root-owned file in SSHConfigDirHost (systemd 256 and later ship
// 20-systemd-ssh-proxy.conf there; Debian 13 has it): ssh reads every file
// an Include names with its permission check (readconf.c's
// SSHCONF_CHECKPERM: the owner must be root or the user, and the file not
// writable by group or others), and in the session's user namespace, which
// maps the user's uid alone, root's files are the overflow uid's
// (nobody): ssh exits at once with "Bad owner or permissions on
// /etc/ssh/ssh_config.d/...", before any connection, even with no
// ~/.ssh/config. No unprivileged user namespace can map root, so mosaic
// binds over that directory a copy of it made by the user (src's files,
// byte for byte, under their own names), which the session's ssh accepts
// as the host's ssh accepts the originals. The copy is no wider than /etc
// is: only what the user can read, read-only, and a file the host's ssh
// would refuse (another user's, group- or world-writable) is copied
// writable by others, so that ssh refuses it inside too; one it cannot read
// is an empty file of mode 0, which ssh cannot open inside either.
//
// It returns "" (nothing to bind) when src is missing or unreadable, or every file in
// it is the user's own already (uid): nothing to mend. Otherwise the
// copy is made once per content under dir (SSHConfigDirIn), atomically, and
// its path is returned.
func SSHConfigCopy(src, dir string, uid int) (string, error) {
	entries, err := os.ReadDir(src)
	if err != nil { // none, or not the user's to read: nothing to show
		return "", nil
	}
	var files []sshSnippet
	mend := false
	h := sha256.New()
	for _, e := range entries {
		f, ok := sshConfigFile(filepath.Join(src, e.Name()), uid, &mend)
		if !ok {
			continue
		}
		f.name = e.Name()
		files = append(files, f)
		h.Write([]byte(f.name + "\x00" + f.mode.String() + "\x00"))
		h.Write(f.data)
		h.Write([]byte{0})
	}
	if !mend {
		return "", nil
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	dst := filepath.Join(dir, hex.EncodeToString(h.Sum(nil))[:32])
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".new-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, f := range files {
		p := filepath.Join(tmp, f.name)
		if err := os.WriteFile(p, f.data, 0o600); err != nil {
			return "", err
		}
		if err := os.Chmod(p, f.mode); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		if fi, serr := os.Stat(dst); serr == nil && fi.IsDir() { // made by a start at the same time
			return dst, nil
		}
		return "", err
	}
	return dst, nil
}

// sshSnippet is one file of the snippets' copy: its name, contents and
// mode.
type sshSnippet struct {
	name string
	data []byte
	mode os.FileMode
}

// sshConfigFile reads one entry of the snippets' directory as ssh would
// (following a link, as fopen does): its contents and the mode its copy
// gets (see SSHConfigCopy), and sets *mend when its owner is not uid, which
// the session's user namespace would show as nobody. Directories and
// other non-regular files are left out (ssh's glob would not read them).
func sshConfigFile(path string, uid int, mend *bool) (sshSnippet, bool) {
	var f sshSnippet
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return f, false
	}
	owner := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner = int(st.Uid)
	}
	if owner != uid {
		*mend = true
	}
	f.mode = fi.Mode().Perm()
	if owner != 0 && owner != uid {
		f.mode |= 0o022 // refused by the host's ssh: refused inside too
	}
	if f.data, err = os.ReadFile(path); err != nil {
		f.data, f.mode = nil, 0
	}
	return f, true
}
