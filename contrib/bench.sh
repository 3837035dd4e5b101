#!/usr/bin/env bash
# bench.sh runs mosaic-bench where a user manager is reachable (make bench
# runs it through contrib/with-user-manager.sh) and prints its JSON; srt is
# measured in the same run when contrib/bench-peers.sh could install it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
srt=$here/bin/srt/node_modules/.bin/srt
[ -x "$srt" ] || srt=""
exec "$here/bin/mosaic-bench" run --mosaic "$here/bin/mosaic" ${srt:+--srt "$srt"} "$@"
