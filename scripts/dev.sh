#!/usr/bin/env bash
# `task dev`: runs the local stack in the foreground until Ctrl-C (or `task stop`):
# Temporal dev server with Web UI, Firestore emulator, BigQuery emulator (sample
# security logs from examples/bigquery), the Gemini stand-in (only without Gemini
# credentials), the codec server (only with PAYLOAD_KEY_FILE: history is then
# encrypted) and the worker. Services already running on their ports (e.g.
# left up by `task investigate`) are reused and left running on exit. The
# Firestore emulator's data is saved under .data/firestore when it stops.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/stack.sh
. scripts/stack.sh

if pid="$(stack_recorded_pid dev)"; then
	stack_err "a 'task dev' session is already running (pid $pid); stop it with 'go tool task stop'"
	exit 1
fi

dev_cleanup() {
	local rc=$?
	trap '' INT TERM HUP
	echo
	stack_log "shutting down..."
	stack_cleanup
	rm -f "$(stack_pidfile dev)"
	exit "$rc"
}
trap dev_cleanup EXIT
# Ctrl-C and `task stop` (SIGTERM) are the normal ways to end a dev session.
trap 'exit 0' INT TERM
trap 'exit 129' HUP

mkdir -p "$STACK_PID_DIR"
echo "$$" >"$(stack_pidfile dev)"

stack_up

cat <<EOF

  Local stack is running.
    Temporal Web UI:    $TEMPORAL_UI_URL
    Temporal gRPC:      $TEMPORAL_ADDRESS (namespace $TEMPORAL_NAMESPACE)
    Firestore emulator: $FIRESTORE_EMULATOR_HOST (project $GOOGLE_CLOUD_PROJECT)
    BigQuery emulator:  http://$BIGQUERY_EMULATOR_HOST (dataset $STACK_BIGQUERY_PROJECT.$STACK_BIGQUERY_DATASET, sample logs from ${STACK_BIGQUERY_DATA#"$STACK_ROOT"/})
    Payloads:           $(if [[ -n "${PAYLOAD_KEY_FILE:-}" ]]; then echo "encrypted with $PAYLOAD_KEY_FILE; the Web UI decrypts them through the codec server $(stack_codec_url)"; else echo "in clear (set PAYLOAD_KEY_FILE to encrypt them)"; fi)
    Logs:               $(stack_show_path "$STACK_LOG_DIR")/
    State:              $(stack_show_path "$STACK_DATA_DIR")/temporal.db, Firestore data saved in $(stack_show_path "$STACK_FIRESTORE_SAVE_DIR") on stop

  In another terminal, either let the task reuse this stack:
    go tool task investigate
    go tool task investigate ALERT=path/to/alert.json -- --lang ja
  or run the starter yourself:
    . $(stack_show_path "$STACK_DATA_DIR")/stack.env
    $(stack_show_path "$STACK_BIN_DIR")/starter alert import examples/alerts/history/*.json
    $(stack_show_path "$STACK_BIN_DIR")/starter investigate --alert examples/alerts/guardduty-ssh-bruteforce.json

  Press Ctrl-C to stop what this session started (or run 'go tool task stop',
  which also stops services that were already running).

EOF

# Stay in the foreground; leave if one of the services started here dies.
while :; do
	for name in "${STACK_STARTED[@]+"${STACK_STARTED[@]}"}"; do
		if ! stack_recorded_pid "$name" >/dev/null; then
			stack_err "$name stopped unexpectedly"
			stack_tail_log "$name"
			exit 1
		fi
	done
	sleep 1
done
