package credentials

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
	"mosaic/internal/regfile"
)

// maxValue bounds one value; systemd reads an environment file line by line
// and refuses lines over 1 MiB, and no credential is anywhere near this.
const maxValue = 64 << 10

// ValidateValue checks that systemd's EnvironmentFile parser can carry value
// byte for byte: it drops assignments that are not UTF-8 or hold a control
// character (a newline, a NUL, a tab, an escape), silently. where says where
// the value came from, for the message; the value itself is never shown.
func ValidateValue(name, value, where string) error {
	switch {
	case !utf8.ValidString(value):
		return errcode.CredentialInvalid.New("credential %s (%s) is not valid UTF-8, which systemd cannot pass to a session", name, where)
	case len(value) > maxValue:
		return errcode.CredentialInvalid.New("credential %s (%s) is longer than %d bytes", name, where, maxValue)
	}
	for _, r := range value {
		if r < 0x20 || r == 0x7f {
			return errcode.CredentialInvalid.New("credential %s (%s) contains a control character (newline, NUL, tab, ...), which an environment file cannot represent", name, where)
		}
	}
	return nil
}

// Encode writes vars in systemd's EnvironmentFile syntax. Every value is
// double-quoted, and the four characters systemd unescapes inside double
// quotes (\ " ` $) are escaped, so that quotes, backslashes, '#', runs of
// spaces and non-ASCII arrive unchanged. The vars must have been validated.
func Encode(vars []credvar.Var) []byte {
	var b bytes.Buffer
	for _, v := range vars {
		b.WriteString(v.Name)
		b.WriteString(`="`)
		for _, r := range v.Value {
			if strings.ContainsRune("\\\"`$", r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
		b.WriteString("\"\n")
	}
	return b.Bytes()
}

// ReadEnvFile reads KEY=VALUE lines from a file the user keeps credentials
// in. The file must belong to the user and be readable by nobody else (mode
// 0600 or 0400): a secret in a file others can read is already leaked. Blank
// lines and lines starting with # are skipped; "export " before a name and
// one pair of quotes around a value are accepted, as in .env files.
func ReadEnvFile(path string) ([]credvar.Var, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, errcode.CredentialFileInsecure.New("--env-file %s is not a regular file", path)
	}
	// Opened without blocking and checked on the descriptor: a FIFO
	// swapped in after the Stat above is refused, not waited on.
	f, fi, err := regfile.Open(path, false)
	if err != nil {
		if os.IsNotExist(err) || os.IsPermission(err) {
			return nil, errcode.CredentialFileMissing.New("--env-file %s: %w", path, err)
		}
		return nil, errcode.CredentialFileInsecure.New("--env-file %s: %w", path, err)
	}
	defer f.Close()
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st == nil || int(st.Uid) != os.Getuid() {
		return nil, errcode.CredentialFileInsecure.New("--env-file %s does not belong to you: keep credentials in a file you own, mode 0600", path)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 && perm != 0o400 {
		return nil, errcode.CredentialFileInsecure.New("--env-file %s has mode %04o, so others may read it: run chmod 600 %s", path, perm, path)
	}
	var vars []credvar.Var
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		name, value, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return nil, errcode.CredentialInvalid.New("--env-file %s line %d is not NAME=VALUE", path, n)
		}
		if err := credvar.ValidateName(name); err != nil {
			return nil, errcode.CredentialInvalid.New("--env-file %s line %d: %w", path, n, err)
		}
		if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
			value = value[1 : len(value)-1]
		}
		if err := ValidateValue(name, value, fmt.Sprintf("%s line %d", path, n)); err != nil {
			return nil, err
		}
		vars = append(vars, credvar.Var{Name: name, Value: value})
	}
	if err := sc.Err(); err != nil {
		return nil, errcode.CredentialInvalid.New("--env-file %s: %w", path, err)
	}
	return vars, nil
}
