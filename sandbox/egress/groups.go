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
	// members and plain are Hosts and Plain with those of Of, expanded once.
	members, plain []HostWhy
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
		{"registry.npmjs.org:443", "package documents and tarballs (npm publish goes here too)"},
		{"registry.yarnpkg.com:443", "yarn's name for the same registry"},
	}},
	{Name: "pypi", Purpose: "the Python Package Index (pip, uv, poetry)", Hosts: []HostWhy{
		{"pypi.org:443", "the simple index and the JSON API (uploads go to upload.pypi.org, not listed)"},
		{"files.pythonhosted.org:443", "the wheels and source archives the index links to"},
	}},
	{Name: "crates", Purpose: "crates.io (cargo)", Hosts: []HostWhy{
		{"index.crates.io:443", "the sparse index"},
		{"static.crates.io:443", "the crate files (crates.io's API, where publishing goes, is not listed)"},
	}},
	{Name: "rubygems", Purpose: "RubyGems (gem, bundler)", Hosts: []HostWhy{
		{"rubygems.org:443", "the API and gem downloads (gem push goes here too)"},
		{"index.rubygems.org:443", "the compact index bundler reads"},
	}},
	{Name: "maven", Purpose: "Maven Central (maven, gradle, sbt)", Hosts: []HostWhy{
		{"repo.maven.apache.org:443", "Maven Central (publishing goes through central.sonatype.com, not listed)"},
		{"repo1.maven.org:443", "Maven Central's older name, which some builds still use"},
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
		g.members, g.plain = g.Hosts, g.Plain
		for _, name := range g.Of {
			sub := LookupGroup(name)
			g.members = append(g.members, sub.members...)
			g.plain = append(g.plain, sub.plain...)
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
