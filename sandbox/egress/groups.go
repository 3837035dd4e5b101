package egress

import (
	"sort"
	"strings"
)

// A Group is a named set of hosts a task commonly needs, allowed at once
// with --allow-host @NAME, AllowHost=@NAME in a profile, or
// `mosaic allow NAME @GROUP`. Each host carries why it is there; Plain
// hosts (port 80) are reached over plain HTTP, GET and HEAD only (the
// package mirrors apt reads over HTTP and checks by signature).
type Group struct {
	Name    string    `json:"name"` // without the @
	Purpose string    `json:"purpose"`
	Hosts   []HostWhy `json:"hosts"`
	Plain   []HostWhy `json:"plain_http,omitempty"`
	Of      []string  `json:"groups,omitempty"` // a group made of groups
	// Publish are the hosts that take the registry's uploads, not in the
	// group: its write grant (@NAME:write) adds them (registry.go).
	Publish []HostWhy `json:"publish,omitempty"`
	// members, plain and publish are Hosts, Plain and Publish with those of
	// Of, expanded once.
	members, plain, publish []HostWhy
	// writable: the group has a write grant (hosts that take writes, its
	// own or its groups').
	writable bool
}

// HostWhy is one host:port of a group and what it serves.
type HostWhy struct {
	Host string `json:"host"` // "name:port"
	Why  string `json:"why"`
}

// groups are the named host groups. Registries let an agent download, and
// some (npm, RubyGems) also publish with whatever token a request carries:
// a package registry is a way out for the workspace's contents to a
// hostile agent holding an attacker's token, which is why no built-in
// profile takes one without being asked (@packages is the one switch).
var groups = []*Group{
	{Name: "npm", Purpose: "the npm registry (npm, pnpm, yarn, bun)", Hosts: []HostWhy{
		{"registry.npmjs.org:443", "package documents and tarballs (read only: npm publish, unpublish, login and tokens are refused but with @npm:write)"},
		{"registry.yarnpkg.com:443", "yarn's name for the same registry"},
	}},
	{Name: "pypi", Purpose: "the Python Package Index (pip, uv, poetry)", Hosts: []HostWhy{
		{"pypi.org:443", "the simple index and the JSON API (read only: its web forms' logins and token changes are refused but with @pypi:write)"},
		{"files.pythonhosted.org:443", "the wheels and source archives the index links to"},
	}, Publish: []HostWhy{
		{"upload.pypi.org:443", "uploads (twine, uv publish)"},
	}},
	{Name: "crates", Purpose: "crates.io (cargo)", Hosts: []HostWhy{
		{"index.crates.io:443", "the sparse index"},
		{"static.crates.io:443", "the crate files"},
	}, Publish: []HostWhy{
		{"crates.io:443", "crates.io's API: cargo publish, yank, owner"},
	}},
	{Name: "rubygems", Purpose: "RubyGems (gem, bundler)", Hosts: []HostWhy{
		{"rubygems.org:443", "the API and gem downloads (read only: gem push, yank and keys are refused but with @rubygems:write)"},
		{"index.rubygems.org:443", "the compact index bundler reads"},
	}},
	{Name: "maven", Purpose: "Maven Central (maven, gradle, sbt)", Hosts: []HostWhy{
		{"repo.maven.apache.org:443", "Maven Central (takes no uploads)"},
		{"repo1.maven.org:443", "Maven Central's older name, which some builds still use"},
	}, Publish: []HostWhy{
		{"central.sonatype.com:443", "the Central Portal, where publishing goes"},
	}},
	{Name: "go", Purpose: "Go's module proxy and checksum database (go mod download)", Hosts: []HostWhy{
		{"proxy.golang.org:443", "the module proxy (GOPROXY's default)"},
		{"sum.golang.org:443", "the checksum database (GOSUMDB's default)"},
	}},
	{Name: "debian", Purpose: "Debian's archives (apt)", Hosts: []HostWhy{
		{"deb.debian.org:443", "the archive over HTTPS"},
		{"security.debian.org:443", "security updates over HTTPS"},
	}, Plain: []HostWhy{
		{"deb.debian.org:80", "the archive over plain HTTP, as apt reads it by default (its files are signed)"},
		{"security.debian.org:80", "security updates over plain HTTP"},
	}},
	{Name: "ubuntu", Purpose: "Ubuntu's archives (apt)", Hosts: []HostWhy{
		{"archive.ubuntu.com:443", "the archive over HTTPS"},
		{"security.ubuntu.com:443", "security updates over HTTPS"},
		{"ports.ubuntu.com:443", "the archive of the other architectures over HTTPS"},
	}, Plain: []HostWhy{
		{"archive.ubuntu.com:80", "the archive over plain HTTP, as apt reads it by default (its files are signed)"},
		{"security.ubuntu.com:80", "security updates over plain HTTP"},
		{"ports.ubuntu.com:80", "the other architectures over plain HTTP"},
	}},
	{Name: "github", Purpose: "GitHub's code downloads and release assets: also where an agent could push, with a token it was given or typed", Hosts: []HostWhy{
		{"github.com:443", "git over HTTPS (clone and fetch; push too, with a token)"},
		{"codeload.github.com:443", "archive downloads (tarballs and zips of a ref)"},
		{"objects.githubusercontent.com:443", "release assets and LFS objects"},
		{"release-assets.githubusercontent.com:443", "release assets (their newer host)"},
		{"raw.githubusercontent.com:443", "raw files"},
		{"api.github.com:443", "release look-ups by installers and gh (writes need a token)"},
	}},
	{Name: "packages", Purpose: "every language's package registry: npm, pypi, crates, rubygems, maven, go (not the system archives, not GitHub)",
		Of: []string{"npm", "pypi", "crates", "rubygems", "maven", "go"}},
}

func init() {
	for _, g := range groups {
		g.members, g.plain, g.publish = g.Hosts, g.Plain, g.Publish
		for _, name := range g.Of {
			sub := LookupGroup(name)
			g.members = append(g.members, sub.members...)
			g.plain = append(g.plain, sub.plain...)
			g.publish = append(g.publish, sub.publish...)
		}
		g.writable = len(g.publish) > 0
		for _, h := range g.members {
			g.writable = g.writable || Guards(h.Host)
		}
	}
}

// LookupGroup returns the group of name (with or without its @), or nil.
func LookupGroup(name string) *Group {
	name = strings.ToLower(strings.TrimPrefix(name, "@"))
	for _, g := range groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// Groups lists the groups, as `mosaic profiles` shows them.
func Groups() []Group {
	out := make([]Group, len(groups))
	for i, g := range groups {
		out[i] = *g
	}
	return out
}

// Members are the group's hosts reached over HTTPS (CONNECT), its own and
// those of the groups it is made of.
func (g *Group) Members() []HostWhy { return g.members }

// PublishMembers are the hosts its write grant adds (registry.go).
func (g *Group) PublishMembers() []HostWhy { return g.publish }

// Writable reports whether the group has a write grant (@NAME:write): it
// has hosts that take writes, or hosts that take uploads.
func (g *Group) Writable() bool { return g.writable }

// PlainMembers are its hosts reached over plain HTTP, GET and HEAD only.
func (g *Group) PlainMembers() []HostWhy { return g.plain }

// groupNames lists the groups' names with their @, sorted, for messages.
func groupNames() string {
	var n []string
	for _, g := range groups {
		n = append(n, "@"+g.Name)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// writableNames lists the groups with a write grant, for messages.
func writableNames() string {
	var n []string
	for _, g := range groups {
		if g.writable {
			n = append(n, "@"+g.Name+WriteSuffix)
		}
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}
