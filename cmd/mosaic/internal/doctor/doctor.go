// Package doctor checks what a session needs from this host (`mosaic
// doctor`): the user manager and its version, the cgroup controllers that
// enforce limits, user namespaces for bwrap, the journal; and with --probe
// runs the escape table (sandbox/escapes) in a throwaway session.
package doctor

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"

	"mosaic/manager"
	"mosaic/sandbox"
	"mosaic/units"
)

// Check is one line of `mosaic doctor`: what was looked at, what was found
// and, when it is not ok, what to do.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn (sessions start, something is missing), fail (no session can start)
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func ok(name, detail string) Check { return Check{Name: name, Status: "ok", Detail: detail} }
func warn(name, detail, fix string) Check {
	return Check{Name: name, Status: "warn", Detail: detail, Fix: fix}
}
func fail(name, detail, fix string) Check {
	return Check{Name: name, Status: "fail", Detail: detail, Fix: fix}
}

// Doctor checks what a session needs from this host and returns one Check
// per thing, and the manager when one could be reached (for --probe).
func Doctor(ctx context.Context) ([]Check, *manager.Manager) {
	var checks []Check
	m, err := manager.Connect(ctx, manager.Options{})
	if err != nil {
		checks = append(checks, fail("user-manager", err.Error(),
			"log in through a systemd user session (XDG_RUNTIME_DIR and DBUS_SESSION_BUS_ADDRESS are set there), or `systemctl --user status` to see why the manager is down"))
	} else {
		checks = append(checks, ok("user-manager", fmt.Sprintf("systemd %d at %s/systemd/private (DBUS_SESSION_BUS_ADDRESS=%s)",
			m.Features().Version, os.Getenv("XDG_RUNTIME_DIR"), os.Getenv("DBUS_SESSION_BUS_ADDRESS"))))
		checks = append(checks, versionCheck(m.Features()), controllersCheck(ctx, m))
	}
	checks = append(checks, lingerCheck(), usernsCheck())
	bwrap, err := sandbox.FindBwrap()
	if err != nil {
		checks = append(checks, fail("bwrap", err.Error(), "sudo apt-get install bubblewrap (or: sudo dnf install bubblewrap), or point MOSAIC_BWRAP at a bwrap binary"))
	} else if err := sandbox.Probe(ctx, bwrap); err != nil {
		checks = append(checks, fail("bwrap", err.Error(), "see the user-namespaces check; in a container, allow unprivileged user namespaces (or run mosaic on the host)"))
	} else {
		checks = append(checks, ok("bwrap", bwrap+" builds the session's namespaces (user, PID, IPC, mount)"))
	}
	h, herr := manager.ThisHost()
	checks = append(checks, stageCheck(h, herr), journalCheck(), deviceCheck(h, herr))
	return checks, m
}

// deviceCheck is whether sessions in network allow get their network
// device (every connection through the proxy) or reach only proxy-aware
// clients' hosts. h is ThisHost's answer (herr its error).
func deviceCheck(h manager.Host, herr error) Check {
	if herr == nil {
		if _, err := h.Net(); err != nil {
			return warn("network-device", "mosaic-net, which serves a session's network device, cannot be used ("+err.Error()+"): a session in network allow reaches its granted hosts only from clients that honour HTTPS_PROXY",
				"make install (it installs mosaic, mosaic-stage and mosaic-net side by side)")
		}
	}
	if !sandbox.TUNUsable() {
		return warn("network-device", sandbox.TUNPath+" is not yours to open: a session in network allow reaches its granted hosts only from clients that honour HTTPS_PROXY (JVMs, gRPC, ssh and database clients fail, with nothing refused on record)",
			"sudo chmod 0666 "+sandbox.TUNPath+" (udev's default on every distribution; a container's /dev may differ), or sudo modprobe tun where it is missing")
	}
	return ok("network-device", sandbox.TUNPath+": a session in network allow sends every connection (any client, any TCP port) and DNS through its egress proxy")
}

// stageCheck is whether the stage binary sessions run (mosaic-stage,
// beside mosaic) is there and of this mosaic's build. h is ThisHost's
// answer (err its error).
func stageCheck(h manager.Host, err error) Check {
	if err == nil {
		err = h.StageErr
	}
	if err != nil {
		return fail("stage-binary", err.Error(), "make install (it installs mosaic and mosaic-stage side by side), or build all three with one go build -o DIR/ ./cmd/mosaic ./cmd/mosaic-stage ./cmd/mosaic-net")
	}
	return ok("stage-binary", h.StageBin+" is of this mosaic's build")
}

// Healthy reports whether no check failed: a session can be started.
func Healthy(checks []Check) bool {
	for _, c := range checks {
		if c.Status == "fail" {
			return false
		}
	}
	return true
}

func versionCheck(f units.Features) Check {
	yes := map[bool]string{true: "yes", false: "no"}
	return ok("systemd-version", fmt.Sprintf("%d: PrivatePIDs %s (257+; bwrap's PID namespace is used either way), PrivateUsers implied %s (254+; mosaic sets it)",
		f.Version, yes[f.PrivatePIDs], yes[f.Version >= 254]))
}

// controllersCheck reads which cgroup controllers the user manager was
// delegated, so which limits will be enforced.
func controllersCheck(ctx context.Context, m *manager.Manager) Check {
	cg, err := m.ControlGroup(ctx)
	if err != nil {
		return warn("cgroup-controllers", "cannot read the manager's control group: "+err.Error(), "")
	}
	mount := cgroup2Mount()
	b, err := os.ReadFile(filepath.Join(mount, cg, "cgroup.controllers"))
	if mount == "" || err != nil {
		return warn("cgroup-controllers", "no cgroup v2 controllers for the user manager ("+cg+"): sessions' limits (mosaic's defaults, mosaic.conf, profiles, --memory-max, --tasks-max, --cpu-quota) and mosaic.slice's are set but NOT enforced: a runaway session can take the machine down",
			"boot with the unified cgroup hierarchy: add systemd.unified_cgroup_hierarchy=1 to GRUB_CMDLINE_LINUX in /etc/default/grub, sudo update-grub, reboot; then "+delegateFix)
	}
	have := strings.Fields(string(b))
	var missing []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return warn("cgroup-controllers", fmt.Sprintf("the user manager has %v; without %v the matching limits (mosaic's defaults included) are set but NOT enforced", have, missing),
			delegateFix)
	}
	return ok("cgroup-controllers", fmt.Sprintf("%v: --memory-max, --tasks-max and --cpu-quota are enforced", have))
}

// delegateFix is how to give the user manager the controllers that enforce
// sessions' limits.
const delegateFix = "sudo mkdir -p /etc/systemd/system/user@.service.d && printf '[Service]\\nDelegate=cpu memory pids\\n' | sudo tee /etc/systemd/system/user@.service.d/delegate.conf && sudo systemctl daemon-reload, then log out and in"

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cgroup2Mount is where the cgroup v2 hierarchy is mounted, or "".
func cgroup2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, x := range fields {
			if x == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" {
				return fields[4]
			}
		}
	}
	return ""
}

func lingerCheck() Check {
	u, err := user.Current()
	if err != nil {
		return warn("lingering", "cannot tell who you are: "+err.Error(), "")
	}
	if u.Uid == "0" {
		// Lingering root is no answer: sessions are meant to run as the
		// user whose agents they are.
		return warn("lingering", "you are root: sessions run in root's user manager, which stops with root's last login; run mosaic as your own user", "")
	}
	if _, err := os.Stat(filepath.Join("/var/lib/systemd/linger", u.Username)); err == nil {
		return ok("lingering", "enabled: sessions outlive your logout")
	}
	return warn("lingering", "not enabled: your sessions stop when you log out",
		"sudo loginctl enable-linger "+u.Username+" (only if sessions must outlive your logout)")
}

func readSysctl(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// usernsCheck reads the settings that allow or forbid unprivileged user
// namespaces, which bwrap needs.
func usernsCheck() Check {
	const name = "user-namespaces"
	if v, set := readSysctl("/proc/sys/user/max_user_namespaces"); set && v == "0" {
		return fail(name, "user.max_user_namespaces is 0", "sudo sysctl -w user.max_user_namespaces=15000; to keep it: echo user.max_user_namespaces=15000 | sudo tee /etc/sysctl.d/90-mosaic.conf")
	}
	if v, set := readSysctl("/proc/sys/kernel/unprivileged_userns_clone"); set && v == "0" {
		return fail(name, "kernel.unprivileged_userns_clone is 0", "sudo sysctl -w kernel.unprivileged_userns_clone=1; to keep it: echo kernel.unprivileged_userns_clone=1 | sudo tee /etc/sysctl.d/90-mosaic.conf")
	}
	if v, set := readSysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); set && v == "1" {
		if p := bwrapAppArmorProfile(); p != "" {
			return ok(name, "kernel.apparmor_restrict_unprivileged_userns is 1, and "+p+" lets bwrap make them")
		}
		return fail(name, "kernel.apparmor_restrict_unprivileged_userns is 1 (Ubuntu 24.04+) and no AppArmor profile lets bwrap create user namespaces",
			"sudo cp /usr/share/apparmor/extra-profiles/bwrap-userns-restrict /etc/apparmor.d/ && sudo apparmor_parser -r /etc/apparmor.d/bwrap-userns-restrict (Ubuntu ships that profile for /usr/bin/bwrap)")
	}
	max, _ := readSysctl("/proc/sys/user/max_user_namespaces")
	return ok(name, "allowed (user.max_user_namespaces="+max+")")
}

// bwrapAppArmorProfile returns an AppArmor profile file that grants bwrap
// user namespaces, or "".
func bwrapAppArmorProfile() string {
	files, _ := filepath.Glob("/etc/apparmor.d/*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), "bwrap") && strings.Contains(string(b), "userns") {
			return f
		}
	}
	return ""
}

// journalCheck asks journalctl whether the user can read a journal of their
// own (per-user journals need a persistent or volatile journal and uid 1000+).
func journalCheck() Check {
	out, err := exec.Command("journalctl", "--user", "-n", "1", "--no-pager", "-o", "cat").CombinedOutput()
	s := strings.TrimSpace(string(out))
	switch {
	case err != nil && strings.Contains(s, "No journal files"):
		return warn("journal", "journalctl --user finds no journal: mosaic logs will show nothing",
			"sudo mkdir -p /var/log/journal && sudo systemctl restart systemd-journald (per-user journals need persistent storage), or: sudo usermod -aG systemd-journal $USER")
	case err != nil:
		return warn("journal", "journalctl --user failed: "+firstLineOf(s), "install systemd's journalctl and check `journalctl --user`")
	case s == "" && !userJournalExists(os.Getuid()):
		// journalctl says nothing at all (exit 0) when the user has no
		// journal file: journald keeps one per user only for uids of
		// 1000 and above, with a persistent or volatile journal.
		return warn("journal", fmt.Sprintf("there is no journal file of yours (uid %d): mosaic logs will show nothing", os.Getuid()),
			"sudo mkdir -p /var/log/journal && sudo systemctl restart systemd-journald (per-user journals need uid 1000+ and persistent or volatile storage)")
	}
	return ok("journal", "journalctl --user reads your journal: mosaic logs works")
}

// userJournalExists reports whether journald keeps a journal file for uid.
func userJournalExists(uid int) bool {
	for _, dir := range []string{"/var/log/journal", "/run/log/journal"} {
		if m, _ := filepath.Glob(fmt.Sprintf("%s/*/user-%d.journal", dir, uid)); len(m) > 0 {
			return true
		}
		if m, _ := filepath.Glob(fmt.Sprintf("%s/*/user-%d@*.journal", dir, uid)); len(m) > 0 {
			return true
		}
	}
	return false
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
