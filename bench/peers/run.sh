#!/usr/bin/env bash
# The peer bench end to end: makes each model ready (prepare.sh: weights filled, tuned on this
# machine into WORK_DIR), then runs build/bench/peer_bench on all of them: parity with the
# reference interpreter, then ONNX Runtime against Fusor's tuned plan in alternating rounds, 2
# threads each.
#
#   bench/peers/run.sh WORK_DIR MODEL.onnx...      (e.g. ../shared/models/*.onnx)
#
# PEER_DIMS binds symbolic dims (prepare.sh); PEER_ROUNDS sets the rounds (default 10).
# Needs a build (build/client/fusor, build/bench/peer_bench) and deploy/install-peers.sh.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$1"
shift
"$root/deploy/install-peers.sh"
specs=()
for model in "$@"; do
  spec="$("$root/bench/peers/prepare.sh" "$work" "$model")" && specs+=("$spec")
done
exec "$root/build/bench/peer_bench" --threads 2 --rounds "${PEER_ROUNDS:-10}" "${specs[@]}"
