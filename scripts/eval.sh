#!/usr/bin/env bash
# `task eval`: the scorecard. Starts the local stack the way `task investigate`
# does (services already running on their ports are reused), then a worker of
# its own that keeps its alerts, memories and transcripts in a Firestore
# database of the emulator meant for the eval (investigator-eval) and serves
# its own task queue (investigations-eval), so that `bin/starter eval` can
# empty that database before each case without touching the analyst's data.
# Runs `bin/starter eval` over the labelled cases in examples/evals (extra
# arguments go to it), then stops what it started. Exits with the starter's
# exit code.
#
#   scripts/eval.sh [--cases DIR|FILE...] [--repeat 3] [--json] [--min-accuracy 0.8] ...
#
# Without GEMINI_API_KEY (or Vertex AI settings) the model is the offline
# stand-in, whose answers are scripted: the report says so and means nothing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/stack.sh
. scripts/stack.sh

STARTER="$STACK_BIN_DIR/starter"
EVAL_DATABASE="investigator-eval"
EVAL_TASK_QUEUE="investigations-eval"

# The eval worker's log line "Started Worker" says it polls.
eval_worker_ready() { grep -q 'Started Worker' "$(stack_logfile eval-worker)" 2>/dev/null; }

# stack.sh knows the group leader of each of its services by name; the eval
# worker runs the worker binary.
eval "stack_base_$(declare -f stack_cmd_pattern)"
stack_cmd_pattern() {
	if [[ "$1" == eval-worker ]]; then
		echo 'worker'
	else
		stack_base_stack_cmd_pattern "$1"
	fi
}

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

# The eval's worker and starter: the stack's settings, the eval's database and
# queue. A worker left by an interrupted eval is replaced.
export FIRESTORE_DATABASE="$EVAL_DATABASE" TEMPORAL_TASK_QUEUE="$EVAL_TASK_QUEUE"
stack_stop eval-worker
stack_spawn eval-worker "$STACK_BIN_DIR/worker"
deadline=$((SECONDS + STACK_WORKER_TIMEOUT))
until eval_worker_ready; do
	if ! stack_group_alive "$(cat "$(stack_pidfile eval-worker)")"; then
		stack_err "the eval worker exited during startup"
		stack_tail_log eval-worker
		exit 1
	fi
	((SECONDS < deadline)) || break
	sleep 0.2
done

echo "eval: scoring the model on the labelled cases (Firestore database $EVAL_DATABASE, emptied before each case; Web UI: http://localhost:$STACK_TEMPORAL_UI_PORT, workflows eval-*)"
rc=0
"$STARTER" eval "$@" || rc=$?
((rc == 0)) || echo "eval: the starter exited with code $rc (logs: $(stack_show_path "$STACK_LOG_DIR")/)" >&2
exit "$rc"
