package request

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"mosaic/internal/errcode"
	"mosaic/internal/regfile"
	"mosaic/units"
)

// ProjectFile is a repository's own settings for the sessions that work
// in it, at the workspace's top or, failing that, at its repository's
// top: in mosaic.conf's format, any of the policy's rules (policyKeys),
// which only tighten and so apply at once, and asks (askKeys) for what the
// project's builds need beyond the user's own defaults, which apply only
// once the user has accepted the file as it is (`mosaic trust`): an agent
// can write the file too, so a change to it asks again.
const ProjectFile = ".mosaic.conf"

// askKeys are what a project file may ask for; each is shown to the user,
// and applies only once the file's content is accepted.
var askKeys = map[string]string{
	"ask-allow-host":  "hosts and @groups the project's builds reach, added to the session's allowlist",
	"ask-publish":     "ports the project's servers publish to the host, as --publish",
	"ask-memory-max":  "the memory the project's builds need, where no flag says",
	"ask-tasks-max":   "the tasks the project's builds need, where no flag says",
	"ask-cpu-quota":   "the CPU the project's builds need, where no flag says",
	"ask-runtime-max": "how long the project's sessions may run, where no flag says",
}

// projectKeys are every key a project file takes.
var projectKeys = func() map[string]string {
	m := map[string]string{}
	for k, v := range policyKeys {
		m[k] = v
	}
	for k, v := range askKeys {
		m[k] = v
	}
	return m
}()

// Project is a workspace's ProjectFile as read.
type Project struct {
	Path    string       `json:"path"`
	Hash    string       `json:"sha256"`
	Rules   []PolicyRule `json:"rules"` // tightening: judged with the policy's
	Asks    []PolicyRule `json:"asks"`
	Trusted bool         `json:"trusted"` // this content was accepted
}

// FindProject is the project file that applies to workspace: its own,
// else its repository top's (the nearest directory above holding .git, no
// higher than the home), or "".
func FindProject(workspace, home string) string {
	for dir := workspace; ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(dir, ProjectFile)); err == nil {
			return filepath.Join(dir, ProjectFile)
		}
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil || dir == home || dir == filepath.Dir(dir) {
			return ""
		}
	}
}

// ReadProject reads the project file of workspace, if there is one (nil
// if not), and whether the user accepted its content. One that does not
// parse is bad input (bad-config) naming its line: nothing starts.
func ReadProject(workspace string, p Paths) (*Project, error) {
	path := FindProject(workspace, p.Home)
	if path == "" {
		return nil, nil
	}
	data, err := regfile.Read(path, true, 1<<20)
	if err != nil {
		return nil, errcode.BadConfig.New("project file %w: make it a regular file, or remove it", err)
	}
	rules, err := parseRules(path, data, projectKeys, errcode.BadConfig)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	proj := &Project{Path: path, Hash: hex.EncodeToString(sum[:]), Rules: []PolicyRule{}, Asks: []PolicyRule{}}
	for _, r := range rules {
		if askKeys[r.Key] != "" {
			proj.Asks = append(proj.Asks, r)
		} else {
			proj.Rules = append(proj.Rules, r)
		}
	}
	trusted, err := readTrusted(p)
	if err != nil {
		return nil, err
	}
	proj.Trusted = trusted[path] == proj.Hash
	return proj, nil
}

// trustFile is where the user's accepted project files are kept: path ->
// the SHA-256 of the content accepted. In the state root, which no
// session sees, 0600.
func trustFile(p Paths) string { return filepath.Join(p.StateRoot, "trusted-projects.json") }

// readTrusted reads the accepted project files; none yet is empty.
func readTrusted(p Paths) (map[string]string, error) {
	m := map[string]string{}
	data, err := regfile.Read(trustFile(p), true, 4<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil {
		return nil, errcode.BadConfig.New("%s: %w: remove it, and accept your project files again (mosaic trust DIR)", trustFile(p), err)
	}
	return m, nil
}

// Trust records the user's acceptance of proj's content as read: its asks
// apply to the sessions that work under it until the file changes.
func Trust(proj *Project, p Paths) error {
	if err := os.MkdirAll(p.StateRoot, 0o700); err != nil {
		return errcode.StateDir.New("%w", err)
	}
	// Two mosaic trust at once each read, add and write the whole file:
	// under one lock, neither loses the other's acceptance.
	lock, err := os.OpenFile(trustFile(p)+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return errcode.StateDir.New("%w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return errcode.StateDir.New("%w", err)
	}
	m, err := readTrusted(p)
	if err != nil {
		return err
	}
	m[proj.Path] = proj.Hash
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := regfile.WriteAtomic(trustFile(p), append(data, '\n')); err != nil { // 0600
		return errcode.StateDir.New("%s: %w", trustFile(p), err)
	}
	proj.Trusted = true
	return nil
}

// AskList is the project's asks as a short list for the user, one line
// each with the file's line.
func (proj *Project) AskList() []string {
	var out []string
	for _, a := range proj.Asks {
		out = append(out, fmt.Sprintf("%s = %s  (line %d: %s)", a.Key, a.Value, a.Line, askKeys[a.Key]))
	}
	return out
}

// askedWords are the words of the project's trusted asks of key.
func (proj *Project) askedWords(key string) []string {
	if proj == nil || !proj.Trusted {
		return nil
	}
	var out []string
	for _, a := range proj.Asks {
		if a.Key == key {
			out = append(out, a.words...)
		}
	}
	return out
}

// askedLimits are the limits the project's trusted asks set.
func (proj *Project) askedLimits() units.Limits {
	var l units.Limits
	if proj == nil || !proj.Trusted {
		return l
	}
	for _, a := range proj.Asks {
		l = a.limit.Or(l)
	}
	return l
}

// note is the one line a session of an untrusted project file's
// workspace is told, or "".
func (proj *Project) note() string {
	if proj == nil || proj.Trusted || len(proj.Asks) == 0 {
		return ""
	}
	var keys []string
	for _, a := range proj.Asks {
		keys = append(keys, strings.TrimPrefix(a.Key, "ask-"))
	}
	slices.Sort(keys)
	return fmt.Sprintf("%s asks for more (%s) than your defaults: the session starts without it; to accept the file as it is now, run: mosaic trust %s", proj.Path, strings.Join(slices.Compact(keys), ", "), filepath.Dir(proj.Path))
}
