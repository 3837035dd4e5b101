// Package egress is a session's way out of its network namespace (network
// allow): an HTTP CONNECT proxy that runs outside the sandbox, in the
// session's egress unit, on a Unix socket bound into the session. It opens
// tunnels only to the names on the session's allowlist, resolves them
// itself and refuses special-purpose addresses the list does not name.
//
// The proxy is unconfined code reading bytes a hostile session chose: every
// request is bounded (head size, time, concurrent tunnels) and checked where
// it is used. The package also holds the unit's command line, written
// (Config.Argv) and read (ParseArgs) in one place; the session side, the
// init's relay to the proxy's socket, is the sandbox package's.
package egress
