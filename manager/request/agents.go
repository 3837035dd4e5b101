package request

import (
	"bufio"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"mosaic/credentials"
	"mosaic/internal/errcode"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"
)

// caFile checks --ca-file: one readable PEM file of certificates. It
// returns the file's real path (bound read-only at that path) and the path
// in bundleDir of the bundle of the system's roots and it, for the clients
// that read one file in place of the system's (written when the session
// starts; egress.TrustEnv names both to every common client: Node and
// Codex, measured with each in issue 16; curl, git, pip, Python's
// requests, Go and OpenSSL).
func caFile(path string, deny []Deny, bundleDir string) (*checked, string, error) {
	if path == "" {
		return nil, "", nil
	}
	ro, err := checkExtra("ca-file", []string{path}, deny)
	if err != nil {
		return nil, "", err
	}
	b, err := os.ReadFile(ro[0].real)
	if err != nil {
		return nil, "", errcode.BadBind.New("--ca-file %s: %w", path, err)
	}
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, "", errcode.BadBind.New("--ca-file %s holds a %s: give only certificates (never a key)", path, blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, "", errcode.BadBind.New("--ca-file %s: %w", path, err)
		}
		n++
	}
	if n == 0 {
		return nil, "", errcode.BadBind.New("--ca-file %s holds no PEM certificate (-----BEGIN CERTIFICATE-----): give one file with every CA the session should trust", path)
	}
	return &ro[0], egress.BundlePath(bundleDir, egress.Bundle(b)), nil
}

// trustCA binds a --ca-file (ca, checked) read-only and points every
// common client at it and at its bundle (egress.TrustEnv), which bwrap
// binds at sandbox.CABundleInside and --sandbox landlock shows at its own
// path.
func trustCA(ro []checked, ca *checked, bundle, mode string, grant *credentials.Grant) []checked {
	if ca == nil {
		return ro
	}
	if mode != sandbox.ModeLandlock {
		bundle = sandbox.CABundleInside
	}
	grant.PassEnv = append(grant.PassEnv, egress.TrustEnv(ca.real, bundle)...)
	return append(ro, *ca)
}

// perUserInstall finds what a command installed outside the system
// directories needs besides its own file: for a script inside an npm
// package, the outermost node_modules directory holding it (its
// dependencies are hoisted there, and Codex's binary is a sibling package),
// and the interpreter its #! names when that lives outside the system
// directories (node from nvm or a tarball), with that interpreter's
// directory for the session's PATH. Everything is bound read-only, the
// interpreter's install (prefix) but its prefixSecrets (hidePrefixSecrets).
func perUserInstall(real string) (ro []string, prefix string, path []string) {
	if i := strings.Index(real, "/node_modules/"); i >= 0 {
		ro = append(ro, real[:i+len("/node_modules")])
	}
	interp := shebang(real)
	if interp == "" {
		return ro, "", nil
	}
	p, err := exec.LookPath(interp)
	if err != nil {
		return ro, "", nil
	}
	ip, err := filepath.EvalSymlinks(p)
	if err != nil || systemFile(ip) {
		return ro, "", nil
	}
	// node's own install (bin/node, lib/node_modules/npm, include) is the
	// directory above bin/.
	root := ip
	if filepath.Base(filepath.Dir(ip)) == "bin" {
		root = filepath.Dir(filepath.Dir(ip))
	}
	return ro, root, []string{filepath.Dir(ip)}
}

// shebang returns the interpreter a script's #! line names: the program
// itself, or the one `env` is asked to find.
func shebang(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "#!") {
		return ""
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) == "env" {
		for _, f := range fields[1:] {
			if !strings.HasPrefix(f, "-") {
				return f
			}
		}
		return ""
	}
	return fields[0]
}

func systemFile(path string) bool {
	for _, d := range systemDirs {
		if sandbox.Within(path, d) {
			return true
		}
	}
	return false
}

// hasVar reports whether env (NAME=VALUE) sets name.
func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}
