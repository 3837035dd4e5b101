package egress

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Allow is an egress allowlist: host names with ports, and the addresses
// (private, loopback, link-local) those names may resolve to because the
// list names them explicitly.
type Allow struct {
	Hosts map[string]bool // "name:port"
	Addrs []netip.Prefix  // explicitly allowed special addresses
}

// ParseAllow reads --allow-host entries: HOST[:PORT] (port 443 unless
// given) for a name, or an IP address or prefix that allowed names may
// resolve to although it is private, loopback or link-local.
func ParseAllow(entries []string) (Allow, error) {
	a := Allow{Hosts: map[string]bool{}}
	for _, e := range entries {
		if p, err := netip.ParsePrefix(e); err == nil {
			a.Addrs = append(a.Addrs, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
			a.Addrs = append(a.Addrs, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		hp, err := NormalizeHost(e)
		if err != nil {
			return Allow{}, err
		}
		a.Hosts[hp] = true
	}
	return a, nil
}

// NormalizeHost checks HOST[:PORT] and returns "host:port" in lower case,
// port 443 unless given. The host must be a DNS name, not an IP literal.
func NormalizeHost(e string) (string, error) {
	host, port := strings.ToLower(strings.TrimSuffix(e, ".")), "443"
	if h, p, err := net.SplitHostPort(host); err == nil {
		host, port = strings.TrimSuffix(h, "."), p
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: the port must be a number from 1 to 65535", e)
	}
	if !validHostName(host) {
		return "", fmt.Errorf("%q is not a host name (letters, digits, '-' and '.', e.g. api.anthropic.com or example.com:8443)", e)
	}
	return host + ":" + strconv.Itoa(n), nil
}

func validHostName(h string) bool {
	if h == "" || len(h) > 253 || strings.Contains(h, "..") {
		return false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return false
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	// A name of digits only in its last label would be read as an address.
	return strings.Trim(labels[len(labels)-1], "0123456789") != ""
}

// Strings lists the allowlist as --allow-host arguments, sorted.
func (a Allow) Strings() []string {
	var out []string
	for h := range a.Hosts {
		out = append(out, h)
	}
	for _, p := range a.Addrs {
		if p.IsSingleIP() {
			out = append(out, p.Addr().String())
		} else {
			out = append(out, p.String())
		}
	}
	sort.Strings(out)
	return out
}

// special reports why an address is not one a name may lead to unless the
// allowlist names it, or "".
func special(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local (cloud metadata lives here)"
	case ip.IsPrivate():
		return "private"
	case ip.IsUnspecified(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "not a host"
	case cgnat.Contains(ip):
		return "shared (carrier-grade NAT)"
	case ip == metadataV6:
		return "cloud metadata"
	}
	return ""
}

var (
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
	metadataV6 = netip.MustParseAddr("fd00:ec2::254")
)
