#!/usr/bin/env bash
# `task eval`: the scorecard. Starts the local stack's "eval" profile
# (bin/stack, cmd/stack/table.go): the services `task investigate` starts
# (those already running on their ports are reused), but instead of the
# analyst's worker a worker of its own that keeps its alerts, memories and
# transcripts in a Firestore database of the emulator meant for the eval
# (investigator-eval) and serves its own task queue (investigations-eval), so
# that `bin/starter eval` can empty that database before each case without
# touching the analyst's data. Runs `bin/starter eval` over the labelled cases
# in examples/evals (extra arguments go to it), then stops what it started.
# Exits with the starter's exit code.
#
#   scripts/eval.sh [--cases DIR|FILE...] [--repeat 3] [--json] [--min-accuracy 0.8] ...
#
# Without GEMINI_API_KEY (or Vertex AI settings) the model is the offline
# stand-in, whose answers are scripted: the report says so and means nothing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
STACK_BIN_DIR="${STACK_BIN_DIR:-bin}"

# bin/stack starts what is not running (the eval's worker: always anew), runs
# this script again with the stack's settings (STACK_RUN=1), and stops what it
# started at the end.
if [[ -z "${STACK_RUN:-}" ]]; then
	if [[ ! -x "$STACK_BIN_DIR/stack" ]]; then
		echo "eval: $STACK_BIN_DIR/stack not found: run 'go tool task build'" >&2
		exit 1
	fi
	exec "$STACK_BIN_DIR/stack" run --profile eval -- bash "$0" "$@"
fi

STARTER="$STACK_BIN_DIR/starter"
# The eval worker's database and queue (the eval-worker entry of
# cmd/stack/table.go): the starter uses the same.
EVAL_DATABASE="investigator-eval"
EVAL_TASK_QUEUE="investigations-eval"
export FIRESTORE_DATABASE="$EVAL_DATABASE" TEMPORAL_TASK_QUEUE="$EVAL_TASK_QUEUE"

if [[ ! -x "$STARTER" ]]; then
	echo "eval: $STARTER not found: run 'go tool task build'" >&2
	exit 1
fi

echo "eval: scoring the model on the labelled cases (Firestore database $EVAL_DATABASE, emptied before each case; Web UI: $TEMPORAL_UI_URL, workflows eval-*)"
rc=0
"$STARTER" eval "$@" || rc=$?
((rc == 0)) || echo "eval: the starter exited with code $rc (logs: ${STACK_DATA_DIR:-.data}/logs/)" >&2
exit "$rc"
