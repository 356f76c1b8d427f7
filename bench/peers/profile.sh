#!/usr/bin/env bash
# Where each runtime spends its time on one model: the model made ready as for the peer bench
# (prepare.sh: weights filled, tuned on this machine into WORK_DIR), then profile.py: each group
# of Fusor's tuned plan beside the ONNX Runtime nodes computing the same ONNX nodes.
#
#   bench/peers/profile.sh WORK_DIR MODEL.onnx [profile.py flags: --runs N, --names, --json OUT]
#
# Needs a build (build/client/fusor, build/bench/group_profile) and deploy/install-peers.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$1"
model="$2"
shift 2
"$root/deploy/install-peers.sh"
spec="$("$root/bench/peers/prepare.sh" "$work" "$model")"
exec "${FUSOR_PEER_PYTHON:-/usr/bin/python3}" "$root/bench/peers/profile.py" "$@" "$spec"
