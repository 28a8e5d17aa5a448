#!/usr/bin/env bash
# Runs a command from a checkout inside the network namespace `unshare -n` made for it: brings its
# loopback up, so the local plane's fixed ports, and dockerd's bridges and iptables rules, stay in
# that namespace and a second plane can run beside one on the host (root needed for unshare).
#
# Usage: unshare -n tools/netns-run.sh CHECKOUT CMD [ARGS...]
set -euo pipefail
(($# >= 2)) || { sed -n '2,6p' "$0" >&2; exit 2; }
ip link set lo up
checkout=$1
shift
cd "$checkout"
export PYTHONPATH="$checkout${PYTHONPATH:+:$PYTHONPATH}"
exec "$@"
