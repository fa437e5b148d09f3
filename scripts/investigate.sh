#!/usr/bin/env bash
# `task investigate`: the main job. Starts the local stack in the background
# (Temporal with its Web UI, the Firestore and BigQuery emulators, the Gemini
# stand-in when no Gemini credentials are set, the codec server with
# PAYLOAD_KEY_FILE, the worker; services already running, e.g. left up by an
# earlier run or `task dev`, are reused), imports the example past alerts and
# investigates one alert with the starter. Exits with the starter's exit code.
#
# The stack stays up afterwards, like `docker compose up -d`, so that the Web
# UI link and the follow-up commands it prints work; `go tool task stop`
# stops it (saving the Firestore emulator's data under .data/firestore).
#
#   INVESTIGATE_TEARDOWN=1  stop, at the end, the services this run started
#                           (for scripts and CI); nothing else changes.
#
#   ALERT=path/to/alert.json scripts/investigate.sh [extra starter flags...]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/stack.sh
. scripts/stack.sh

case "${INVESTIGATE_TEARDOWN:-}" in
1 | [Tt][Rr][Uu][Ee] | [Yy][Ee][Ss]) TEARDOWN=1 ;;
'' | 0 | [Ff][Aa][Ll][Ss][Ee] | [Nn][Oo]) TEARDOWN=0 ;;
*)
	echo "investigate: INVESTIGATE_TEARDOWN must be 1 (stop the stack at the end) or 0 (leave it running), not '$INVESTIGATE_TEARDOWN'" >&2
	exit 2
	;;
esac
STACK_STOP_ON_EXIT=$TEARDOWN

ALERT="${ALERT:-examples/alerts/guardduty-ssh-bruteforce.json}"
# Task runs this from the repository root; a relative ALERT given from another
# directory is looked up there first (Task passes it as INVESTIGATE_USER_CWD).
if [[ "$ALERT" != /* && -n "${INVESTIGATE_USER_CWD:-}" && -f "$INVESTIGATE_USER_CWD/$ALERT" ]]; then
	ALERT="$(cd "$(dirname "$INVESTIGATE_USER_CWD/$ALERT")" && pwd)/$(basename "$ALERT")"
fi
HISTORY_DIR="examples/alerts/history"
STARTER="$STACK_BIN_DIR/starter"
# The starter's output, also kept to find the workflow ID for the closing lines.
OUTPUT="$STACK_LOG_DIR/investigate.out"
# 1 once every service answers: from then on the stack is left running.
STACK_IS_UP=0

# The closing lines: where to look now that the stack stays up.
investigate_next_steps() {
	local id="" ui="" starter env show_id
	if [[ -f "$OUTPUT" ]]; then
		id="$(sed -n 's/^Workflow ID: *//p' "$OUTPUT" | head -n 1)"
		ui="$(sed -n 's/^Web UI: *//p' "$OUTPUT" | head -n 1)"
	fi
	# Quoted for the shell, as the user will paste them.
	starter="$(printf '%q' "$(stack_show_path "$STARTER")")"
	env="$(printf '%q' "$(stack_show_path "$STACK_DATA_DIR/stack.env")")"
	show_id="ID"
	if [[ -n "$id" ]]; then
		show_id="$(printf '%q' "$id")"
	fi
	[[ -n "$ui" ]] || ui="$TEMPORAL_UI_URL"
	cat <<EOF

The local stack is still running. Look around:
  Web UI     $ui
  Settings   . $env   (in your shell, before $starter)
  Follow     $starter watch $show_id   (Ctrl-C stops watching, not the investigation)
  Ask        $starter ask $show_id "What should we check next?"
  Run tree   $starter tree $show_id
  Stop       go tool task stop   (alerts, transcripts and memories stay in $(stack_show_path "$STACK_DATA_DIR")/; go tool task clean wipes them)
EOF
}

# shellcheck disable=SC2317 # invoked by the EXIT trap
investigate_cleanup() {
	local rc=$?
	trap '' INT TERM HUP
	if ((TEARDOWN || !STACK_IS_UP)); then
		if ((${#STACK_STARTED[@]})); then
			echo
			stack_log "stopping the services this run started..."
		fi
		stack_cleanup
	else
		# Saved now too, so that a machine crash before `stop` loses
		# nothing of this run.
		if stack_recorded_pid firestore >/dev/null; then
			stack_save_firestore >/dev/null || true
		fi
		investigate_next_steps
	fi
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
STACK_IS_UP=1

shopt -s nullglob
history=("$HISTORY_DIR"/*.json)
shopt -u nullglob
if ((${#history[@]})); then
	echo "investigate: importing ${#history[@]} past alert(s) from $HISTORY_DIR"
	"$STARTER" alert import "${history[@]}"
else
	echo "investigate: no past alerts in $HISTORY_DIR/*.json; skipping the import"
fi

echo "investigate: investigating $ALERT (Web UI: $TEMPORAL_UI_URL)"
rm -f "$OUTPUT"
set +e
# tee -i: Ctrl-C stops the starter's following (it prints how to resume),
# not the copy of its output.
"$STARTER" investigate --alert "$ALERT" "$@" | tee -i "$OUTPUT"
rc=${PIPESTATUS[0]}
set -e
if ((rc != 0)); then
	echo "investigate: the starter exited with code $rc (logs: $(stack_show_path "$STACK_LOG_DIR")/)" >&2
fi
exit "$rc"
