#!/usr/bin/env bash
# bench-peers.sh installs the peers make bench measures mosaic against that
# a machine may lack: Anthropic's sandbox-runtime (srt) from npm into
# bin/srt/ (not committed), and, as root with apt, the ripgrep and socat srt
# needs on Linux. Best effort: a peer that cannot be had is reported as
# missing in docs/BENCHMARKS.md, and the rest is measured.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	need=()
	command -v rg >/dev/null || need+=(ripgrep)
	command -v socat >/dev/null || need+=(socat)
	if [ ${#need[@]} -gt 0 ]; then
		echo "bench: installing ${need[*]} for srt" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 ||
			{ apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null 2>&1; }
	fi
fi
if command -v npm >/dev/null && [ ! -x "$here/bin/srt/node_modules/.bin/srt" ]; then
	echo "bench: installing @anthropic-ai/sandbox-runtime from npm into bin/srt" >&2
	npm install --silent --prefix "$here/bin/srt" @anthropic-ai/sandbox-runtime >&2 || echo "bench: npm could not install srt; it is left out" >&2
fi
exit 0
