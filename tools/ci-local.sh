#!/usr/bin/env bash
# Runs .ci/run the way CI does, so "it passes on a fresh machine" can be checked before stopping:
# a fresh clone of the committed main (uncommitted work is not in it) into a temporary folder, a
# fresh Python virtual environment, CI=true and no standard input. The run reads nothing outside
# its clone, so a checkout needs nothing beside it.
#
# Usage:
#   tools/ci-local.sh            reuse the pinned Go binaries cached under ~/.cache (the usual run)
#   tools/ci-local.sh --cold     also fresh Go build, module and binary caches (a new machine's cost:
#                                47 min in all, measured in docs/kind.md "In CI")
#   tools/ci-local.sh --keep     keep the temporary folder (default: removed on success)
#   CALIBRATOR_CI_WORKERS=N tools/ci-local.sh
#                                the suite with N pytest-xdist workers (1 to 8; CI's is 3)
#
# The last line printed is "ci-local: PASS <seconds> s" or "ci-local: FAIL <seconds> s (exit N)";
# the full log is in <tmp>/ci.log, whose path is printed first.
set -euo pipefail

cold=false
keep=false
for arg in "$@"; do
  case "$arg" in
    --cold) cold=true ;;
    --keep) keep=true ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
branch=$(git -C "$repo" rev-parse --abbrev-ref HEAD)
[[ "$branch" == main ]] || echo "ci-local: note: HEAD is on $branch; CI runs main" >&2

tmp=$(mktemp -d /tmp/ci-local.XXXXXX)
log="$tmp/ci.log"
echo "ci-local: $tmp (log: $log)"
git clone --quiet --branch main --single-branch "$repo" "$tmp/main"
echo "ci-local: main at $(git -C "$tmp/main" log -1 --format='%h %s')"
python3 -m venv "$tmp/venv"

env_args=(CI=true PATH="$tmp/venv/bin:$PATH" VIRTUAL_ENV="$tmp/venv")
if $cold; then
  mkdir -p "$tmp/cache"
  env_args+=(
    CALIBRATOR_BIN_CACHE="$tmp/cache/bin" GOCACHE="$tmp/cache/go-build"
    GOMODCACHE="$tmp/cache/gomod" PIP_NO_CACHE_DIR=1
  )
fi

start=$(date +%s)
set +e
(cd "$tmp/main" && env "${env_args[@]}" bash .ci/run </dev/null >"$log" 2>&1)
rc=$?
set -e
secs=$(($(date +%s) - start))
# The random-order seed (pytest-randomly's header line), so a failing order can be replayed.
grep -m1 -- "--randomly-seed" "$log" || echo "ci-local: no random-order seed in the log"
# When each phase of .ci/run began (its "== ... [t+N s]" lines), for the cold and cached figures.
grep -E '^== .*\[t\+[0-9]+ s\]$' "$log" | sed 's/^/ci-local: /' || true
tail -n 5 "$log"
if ((rc == 0)); then
  $keep || { chmod -R u+w "$tmp"; rm -rf "$tmp"; }
  echo "ci-local: PASS ${secs} s"
else
  echo "ci-local: FAIL ${secs} s (exit $rc; kept $tmp)"
  exit "$rc"
fi
