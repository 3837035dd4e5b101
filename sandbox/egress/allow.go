package egress

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Allow is an egress allowlist: host names with ports, and the addresses
// (private, loopback, link-local) those names may resolve to because the
// list names them explicitly.
type Allow struct {
	Hosts map[string]bool // "name:port", named or through a group
	Addrs []netip.Prefix  // explicitly allowed special addresses
	Local map[int]bool    // ports of the host's loopback (local.go)
	// Plain are the "name:80" of mirror groups (@debian, @ubuntu), reached
	// over plain HTTP, GET and HEAD only (mirror.go).
	Plain map[string]bool
	// Write are the hosts whose writes are granted (a package group's
	// write grant, @npm:write: registry.go), read-only otherwise.
	Write map[string]bool
	// Groups are the groups named ("@npm", "@npm:write"), named lists the
	// hosts named themselves: Strings gives back what was named.
	Groups []string
	named  map[string]bool
}

// ParseAllow reads --allow-host entries: HOST[:PORT] (port 443 unless
// given) for a name, @GROUP for a group of names (groups.go), a package
// group's @GROUP:write for it with its writes (registry.go), or an IP
// address or prefix that allowed names may resolve to although it is
// private, loopback or link-local.
func ParseAllow(entries []string) (Allow, error) {
	a := Allow{Hosts: map[string]bool{}, Local: map[int]bool{}, Plain: map[string]bool{}, Write: map[string]bool{}, named: map[string]bool{}}
	for _, e := range entries {
		if strings.HasPrefix(e, "@") {
			name, write := strings.CutSuffix(strings.ToLower(e), WriteSuffix)
			g := LookupGroup(name)
			if g == nil {
				return Allow{}, fmt.Errorf("%q is not a host group (the groups: %s; `mosaic profiles` lists their hosts)", e, groupNames())
			}
			if write && !g.Writable() {
				return Allow{}, fmt.Errorf("%q: @%s has no write grant (its hosts take no writes); the groups with one: %s", e, g.Name, writableNames())
			}
			a.addGroup(g, write)
			continue
		}
		if port, ok, err := parseLocal(e); ok {
			if err != nil {
				return Allow{}, err
			}
			a.Local[port] = true
			continue
		}
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
		a.named[hp] = true
	}
	return a, nil
}

func (a *Allow) addGroup(g *Group, write bool) {
	entry := "@" + g.Name
	if write {
		entry += WriteSuffix
		for _, h := range g.PublishMembers() {
			a.Hosts[h.Host] = true
			a.Write[h.Host] = true
		}
	}
	if !slices.Contains(a.Groups, entry) {
		a.Groups = append(a.Groups, entry)
	}
	for _, h := range g.Members() {
		a.Hosts[h.Host] = true
		if write {
			a.Write[h.Host] = true
		}
	}
	for _, h := range g.PlainMembers() {
		a.Plain[h.Host] = true
	}
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
	out := append([]string{}, a.Groups...)
	for h := range a.Hosts {
		if a.named[h] || a.named == nil {
			out = append(out, h)
		}
	}
	for _, p := range a.Addrs {
		if p.IsSingleIP() {
			out = append(out, p.Addr().String())
		} else {
			out = append(out, p.String())
		}
	}
	out = append(out, a.localStrings()...)
	sort.Strings(out)
	return out
}

// specialRanges are IANA's special-purpose address registries (IPv4 and
// IPv6, as of 2025), multicast, the deprecated IPv6 site-local range, and
// IPv4-translated IPv6. A name may resolve into none of them unless the
// allowlist names the address or a prefix holding it: they are the host's
// own (loopback, 0/8), the local networks (private, link-local with the
// cloud metadata service, CGNAT, ULA), reserved or documentation ranges
// that no public service lives at, or forms that carry an IPv4 address
// inside an IPv6 one (checked separately, see embeddedV4).
var specialRanges = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network (0.0.0.0/8 reaches the host itself)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata lives here)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation (TEST-NET-1)"},
	{netip.MustParsePrefix("192.31.196.0/24"), "AS112"},
	{netip.MustParsePrefix("192.52.193.0/24"), "AMT"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast (deprecated)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("192.175.48.0/24"), "AS112 direct delegation"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation (TEST-NET-3)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},

	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible IPv6 (deprecated)"},
	{netip.MustParsePrefix("::ffff:0:0/96"), "IPv4-mapped IPv6"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated IPv6"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
	{netip.MustParsePrefix("2620:4f:8000::/48"), "AS112 direct delegation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("5f00::/16"), "segment routing (SRv6) SIDs"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (private)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (deprecated)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// specialRange names the most specific special range holding ip, or "".
func specialRange(ip netip.Addr) string {
	why, bits := "", -1
	for _, r := range specialRanges {
		if r.prefix.Contains(ip) && r.prefix.Bits() > bits {
			why, bits = r.why, r.prefix.Bits()
		}
	}
	return why
}

// embeddedV4 returns the IPv4 addresses an IPv6 address carries, which is
// where a packet to it may end up (a NAT64 gateway, a 6to4 or Teredo relay,
// the host's own stack for a mapped or compatible address).
func embeddedV4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return nil
	}
	b := ip.As16()
	last := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	switch {
	case teredo.Contains(ip):
		// The server's address, then the client's, stored inverted.
		return []netip.Addr{netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}),
			netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})}
	case sixToFour.Contains(ip):
		return []netip.Addr{netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})}
	}
	for _, p := range lastIs4 {
		if p.Contains(ip) {
			return []netip.Addr{last}
		}
	}
	return nil
}

var (
	teredo    = netip.MustParsePrefix("2001::/32")
	sixToFour = netip.MustParsePrefix("2002::/16")
	// The forms that carry an IPv4 address in their last 32 bits.
	// (Local-use NAT64 may place it elsewhere; the range is refused as a
	// whole unless the allowlist names it, and then its last 32 bits are
	// checked too.)
	lastIs4 = []netip.Prefix{netip.MustParsePrefix("::/96"), netip.MustParsePrefix("::ffff:0:0/96"),
		netip.MustParsePrefix("::ffff:0:0:0/96"), netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
)

// refusal says why a name may not lead to ip, or "": ip, or an IPv4
// address it carries, lies in a special range the allowlist does not name.
func (a Allow) refusal(ip netip.Addr) string {
	if why := specialRange(ip); why != "" && !a.allowedAddr(ip) {
		return fmt.Sprintf("a %s address", why)
	}
	for _, v4 := range embeddedV4(ip) {
		if why := specialRange(v4); why != "" && !a.allowedAddr(v4) {
			return fmt.Sprintf("an address carrying %s, a %s address", v4, why)
		}
	}
	return ""
}

func (a Allow) allowedAddr(ip netip.Addr) bool {
	for _, p := range a.Addrs {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
