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
# shellcheck source=scripts/stack.sh
. scripts/stack.sh

HISTORY_DIR="examples/alerts/history"
STARTER="$STACK_BIN_DIR/starter"

# shellcheck disable=SC2317 # invoked by the EXIT trap
eval_cleanup() {
	local rc=$?
	trap '' INT TERM HUP
	if ((${#STACK_STARTED[@]})); then
		stack_log "stopping the services this run started..."
	fi
	stack_cleanup
	exit "$rc"
}
trap eval_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

if [[ ! -x "$STARTER" ]]; then
	echo "eval: $STARTER not found: run 'go tool task build'" >&2
	exit 1
fi

stack_up

echo "eval: importing the past alerts in $HISTORY_DIR"
"$STARTER" alert import "$HISTORY_DIR"/*.json >/dev/null

echo "eval: scoring the model on the labelled cases (Web UI: http://localhost:$STACK_TEMPORAL_UI_PORT, workflows eval-*)"
rc=0
"$STARTER" eval "$@" || rc=$?
((rc == 0)) || echo "eval: the starter exited with code $rc (logs: .data/logs/)" >&2
exit "$rc"
