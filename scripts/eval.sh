#!/usr/bin/env bash
# `task eval`: the scorecard. Starts the local stack the way `task investigate`
# does (services already running on their ports are reused), imports the
# example past alerts, runs `bin/starter eval` over the labelled cases in
# examples/evals (extra arguments go to it), then stops what it started. Exits
# with the starter's exit code.
#
#   scripts/eval.sh [--cases DIR|FILE...] [--json] [--min-accuracy 0.8] ...
#
# Without GEMINI_API_KEY (or Vertex AI settings) the model is the offline
# stand-in, whose answers are scripted: the table says so and means nothing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
STACK_BIN_DIR="${STACK_BIN_DIR:-bin}"

# bin/stack starts what is not running, runs this script again with the
# stack's settings (STACK_RUN=1), and stops what it started at the end.
if [[ -z "${STACK_RUN:-}" ]]; then
	if [[ ! -x "$STACK_BIN_DIR/stack" ]]; then
		echo "eval: $STACK_BIN_DIR/stack not found: run 'go tool task build'" >&2
		exit 1
	fi
	exec "$STACK_BIN_DIR/stack" run -- bash "$0" "$@"
fi

HISTORY_DIR="examples/alerts/history"
STARTER="$STACK_BIN_DIR/starter"

if [[ ! -x "$STARTER" ]]; then
	echo "eval: $STARTER not found: run 'go tool task build'" >&2
	exit 1
fi

echo "eval: importing the past alerts in $HISTORY_DIR"
"$STARTER" alert import "$HISTORY_DIR"/*.json >/dev/null

echo "eval: scoring the model on the labelled cases (Web UI: $TEMPORAL_UI_URL, workflows eval-*)"
rc=0
"$STARTER" eval "$@" || rc=$?
((rc == 0)) || echo "eval: the starter exited with code $rc (logs: .data/logs/)" >&2
exit "$rc"
