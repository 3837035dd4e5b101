package request

import (
	"mosaic/internal/errcode"
	"mosaic/sandbox"
	"mosaic/sandbox/publish"
)

// publishOf reads the request's --publish: each [ADDR:]HOSTPORT[:PORT],
// a host address given once. A session with the host's network has its
// ports there already; --scope and --sandbox landlock have no forwarder yet.
func publishOf(req Request, network, mode string) ([]publish.Port, error) {
	given := len(req.Publish)
	if network != sandbox.NetworkHost && !req.Scope && mode != sandbox.ModeLandlock {
		// A trusted project file's ports, where the session can have them.
		req.Publish = append(append([]string{}, req.Publish...), req.project.askedWords("ask-publish")...)
	}
	if len(req.Publish) == 0 {
		return nil, nil
	}
	switch {
	case network == sandbox.NetworkHost:
		return nil, errcode.BadPublish.New("--publish with --network host: the session listens on the host's network already (and is not confined); leave one out")
	case req.Scope:
		return nil, errcode.BadPublish.New("--publish is not available with --scope yet: run the session without --scope")
	case mode == sandbox.ModeLandlock:
		return nil, errcode.BadPublish.New("--publish is not available with --sandbox landlock yet")
	}
	var out []publish.Port
	seen := map[string]bool{}
	for i, v := range req.Publish {
		p, err := publish.Parse(v)
		if err != nil {
			return nil, errcode.BadPublish.New("--publish %w: write it as docker run -p does, [ADDR:]HOSTPORT[:PORT], e.g. 8000 or 127.0.0.1:8080:8000", err)
		}
		if network == sandbox.NetworkAllow && p.Port == sandbox.ProxyPort {
			// Whoever reaches the host's port (any local user, on
			// loopback) would use the session's egress proxy, with the
			// keys it injects.
			return nil, errcode.BadPublish.New("--publish %s: port %d inside the session is its egress relay, which the host must not reach: publish another port", v, p.Port)
		}
		if seen[p.HostAddr()] && i >= given {
			continue // the project's port is given already: a flag wins
		}
		if seen[p.HostAddr()] {
			return nil, errcode.BadPublish.New("--publish: %s is given twice", p.HostAddr())
		}
		seen[p.HostAddr()] = true
		out = append(out, p)
	}
	return out, nil
}
