#!/usr/bin/env bash
# bench.sh runs mosaic-bench where a user manager is reachable (make bench
# runs it through contrib/with-user-manager.sh) and prints its JSON. It
# installs Anthropic's sandbox-runtime (srt) from npm into a cache of the
# user's, when npm is there, to measure it in the same run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
srt=""
if command -v npm >/dev/null; then
	prefix=$HOME/.cache/mosaic-bench/srt
	if [ ! -x "$prefix/node_modules/.bin/srt" ]; then
		echo "bench: installing @anthropic-ai/sandbox-runtime from npm into $prefix" >&2
		npm install --silent --prefix "$prefix" @anthropic-ai/sandbox-runtime >&2 || true
	fi
	[ -x "$prefix/node_modules/.bin/srt" ] && srt=$prefix/node_modules/.bin/srt
fi
exec "$here/bin/mosaic-bench" run --mosaic "$here/bin/mosaic" ${srt:+--srt "$srt"} "$@"
