#!/usr/bin/env bash
# `task investigate`: the main job. Starts the local stack in the background
# (Temporal, the Firestore and BigQuery emulators, the Gemini stand-in when no
# Gemini credentials are set, the worker; services already running on their
# ports, e.g. from `task dev`, are reused), imports the example past alerts,
# investigates one alert with the starter, then stops what it started. Exits
# with the starter's exit code.
#
#   ALERT=path/to/alert.json scripts/investigate.sh [extra starter flags...]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/stack.sh
. scripts/stack.sh

ALERT="${ALERT:-examples/alerts/guardduty-ssh-bruteforce.json}"
# Task runs this from the repository root; a relative ALERT given from another
# directory is looked up there first (Task passes it as INVESTIGATE_USER_CWD).
if [[ "$ALERT" != /* && -n "${INVESTIGATE_USER_CWD:-}" && -f "$INVESTIGATE_USER_CWD/$ALERT" ]]; then
	ALERT="$(cd "$(dirname "$INVESTIGATE_USER_CWD/$ALERT")" && pwd)/$(basename "$ALERT")"
fi
HISTORY_DIR="examples/alerts/history"
STARTER="$STACK_BIN_DIR/starter"

# shellcheck disable=SC2317 # invoked by the EXIT trap
investigate_cleanup() {
	local rc=$?
	trap '' INT TERM HUP
	if ((${#STACK_STARTED[@]})); then
		echo
		stack_log "stopping the services this run started..."
	fi
	stack_cleanup
	exit "$rc"
}
trap investigate_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

if [[ ! -f "$ALERT" ]]; then
	echo "investigate: alert file not found: $ALERT" >&2
	exit 2
fi
if [[ ! -x "$STARTER" ]]; then
	echo "investigate: $STARTER not found: run 'go tool task build'" >&2
	exit 1
fi

stack_up

shopt -s nullglob
history=("$HISTORY_DIR"/*.json)
shopt -u nullglob
if ((${#history[@]})); then
	echo "investigate: importing ${#history[@]} past alert(s) from $HISTORY_DIR"
	"$STARTER" alert import "${history[@]}"
else
	echo "investigate: no past alerts in $HISTORY_DIR/*.json; skipping the import"
fi

echo "investigate: investigating $ALERT (Web UI: http://localhost:$STACK_TEMPORAL_UI_PORT)"
set +e
"$STARTER" investigate --alert "$ALERT" "$@"
rc=$?
set -e
if ((rc != 0)); then
	echo "investigate: the starter exited with code $rc (logs: .data/logs/)" >&2
fi
exit "$rc"
