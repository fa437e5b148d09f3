# shellcheck shell=bash
# Local stack: Temporal dev server (+ Web UI), Firestore emulator, BigQuery
# emulator (with the sample security logs of examples/bigquery), the Gemini
# stand-in (only when no Gemini credentials are configured), the codec server
# (only with a payload key file, PAYLOAD_KEY_FILE: history is then encrypted
# and the Web UI decrypts it through the codec server) and the worker.
#
# Sourced by scripts/dev.sh and scripts/investigate.sh, which call stack_up;
# services found already running on their ports (e.g. left up by an earlier
# `investigate`) are reused. stack_cleanup stops only what this shell started
# (dev.sh on exit; investigate.sh only with INVESTIGATE_TEARDOWN=1).
#
# Run directly:  bash scripts/stack.sh stop | status | save | clean
#   stop    stops every service recorded under .data/pids (and a `dev` session),
#           saving the Firestore emulator's data first;
#   status  shows what runs; save saves the Firestore data now;
#   clean   stops everything without saving and removes the local state.
#
# The Firestore emulator keeps its data in memory: the stack saves it under
# .data/firestore when it stops the emulator (and after each `investigate`)
# and loads the newest save when it starts it, so that alerts, transcripts and
# memories stay in step with Temporal's history in .data/temporal.db.
#
# Every service runs in its own process group (bash `set -m` before `cmd &`
# makes pgid == pid) and is stopped with `kill -- -pgid`: the Firestore emulator
# is a JVM grandchild of gcloud that would otherwise keep its port.
# Logs: .data/logs/<name>.log   pids: .data/pids/<name>.pid
# Overrides: STACK_DATA_DIR, STACK_BIN_DIR, STACK_*_PORT (below).

STACK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACK_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/investigator"
STACK_TEMPORAL_BIN="${TEMPORAL_CLI:-$STACK_CACHE/bin/temporal}"
STACK_BIGQUERY_BIN="${BIGQUERY_EMULATOR:-$STACK_CACHE/bin/bigquery-emulator}"
# STACK_BIN_DIR (worker, starter, gemini-standin) and STACK_DATA_DIR (state,
# logs, pids) can be moved, e.g. by tests that run a second stack; relative
# paths are taken from the repository root.
STACK_BIN_DIR="${STACK_BIN_DIR:-$STACK_ROOT/bin}"
STACK_DATA_DIR="${STACK_DATA_DIR:-$STACK_ROOT/.data}"
[[ "$STACK_BIN_DIR" == /* ]] || STACK_BIN_DIR="$STACK_ROOT/$STACK_BIN_DIR"
[[ "$STACK_DATA_DIR" == /* ]] || STACK_DATA_DIR="$STACK_ROOT/$STACK_DATA_DIR"
STACK_LOG_DIR="$STACK_DATA_DIR/logs"
STACK_PID_DIR="$STACK_DATA_DIR/pids"
# Saves of the Firestore emulator's data (see "Firestore data on disk").
STACK_FIRESTORE_SAVE_DIR="$STACK_DATA_DIR/firestore"

STACK_HOST="127.0.0.1"
STACK_TEMPORAL_PORT="${STACK_TEMPORAL_PORT:-7233}"
STACK_TEMPORAL_UI_PORT="${STACK_TEMPORAL_UI_PORT:-8233}"
STACK_FIRESTORE_PORT="${STACK_FIRESTORE_PORT:-8081}"
STACK_STANDIN_PORT="${STACK_STANDIN_PORT:-8089}"
STACK_BIGQUERY_PORT="${STACK_BIGQUERY_PORT:-9050}"
STACK_BIGQUERY_GRPC_PORT="${STACK_BIGQUERY_GRPC_PORT:-9060}"
STACK_CODEC_PORT="${STACK_CODEC_PORT:-8234}"
STACK_NAMESPACE="default"

# The BigQuery emulator's data (loaded into memory at every start) and what the
# worker's BigQuery sub-agent is told about it. The project and dataset are the
# ones data.yaml defines.
STACK_BIGQUERY_PROJECT="demo-investigator"
STACK_BIGQUERY_DATASET="security_logs"
STACK_BIGQUERY_DATA="${STACK_BIGQUERY_DATA:-$STACK_ROOT/examples/bigquery/data.yaml}"
STACK_BIGQUERY_TABLES="${STACK_BIGQUERY_TABLES:-$STACK_ROOT/examples/bigquery/tables.yaml}"
STACK_BIGQUERY_RUNBOOKS="${STACK_BIGQUERY_RUNBOOKS:-$STACK_ROOT/examples/bigquery/runbooks}"

# Start timeouts (seconds).
STACK_TEMPORAL_TIMEOUT="${STACK_TEMPORAL_TIMEOUT:-60}"
STACK_FIRESTORE_TIMEOUT="${STACK_FIRESTORE_TIMEOUT:-90}"
STACK_BIGQUERY_TIMEOUT="${STACK_BIGQUERY_TIMEOUT:-90}"
STACK_STANDIN_TIMEOUT="${STACK_STANDIN_TIMEOUT:-30}"
STACK_WORKER_TIMEOUT="${STACK_WORKER_TIMEOUT:-20}"
STACK_CODEC_TIMEOUT="${STACK_CODEC_TIMEOUT:-20}"
# Seconds to wait after SIGTERM before SIGKILL.
STACK_STOP_TIMEOUT="${STACK_STOP_TIMEOUT:-20}"

# Services started by this shell, in start order (stack_cleanup stops them in reverse).
STACK_STARTED=()
# 1 when this shell stops what it started on exit (dev.sh, investigate.sh
# with INVESTIGATE_TEARDOWN=1); only changes what the log says about reuse.
STACK_STOP_ON_EXIT="${STACK_STOP_ON_EXIT:-1}"
STACK_USING_STANDIN=0
# 1 while the BigQuery emulator started by stack_launch_bigquery is still loading.
STACK_BIGQUERY_PENDING=0

stack_log()  { printf 'stack: %s\n' "$*"; }
stack_warn() { printf 'stack: WARNING: %s\n' "$*" >&2; }
stack_err()  { printf 'stack: ERROR: %s\n' "$*" >&2; }

stack_reuse_note() { ((STACK_STOP_ON_EXIT)) && printf ' (not stopped on exit)'; return 0; }

# A path as the user should type it: relative to the repository root when it
# is inside it and the user works there, absolute otherwise.
stack_show_path() { # <path>
	if [[ "$1" == "$STACK_ROOT"/* && "${STACK_USER_CWD:-$STACK_ROOT}" == "$STACK_ROOT" ]]; then
		printf '%s\n' "${1#"$STACK_ROOT"/}"
	else
		printf '%s\n' "$1"
	fi
}

# True while a process of the group is alive. Its exited processes count for
# kill -0 until init reaps them, which can take seconds (they are no longer
# this shell's children), so zombies are left out.
stack_group_alive() { # <pgid>
	kill -0 -- "-$1" 2>/dev/null || return 1
	stack_pid_alive "$1" && return 0
	ps -A -o pgid= -o stat= 2>/dev/null | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { alive = 1 } END { exit !alive }'
}

stack_pid_alive() { # <pid>
	local stat
	kill -0 "$1" 2>/dev/null || return 1
	if [[ -r "/proc/$1/stat" ]] && stat="$(<"/proc/$1/stat")" 2>/dev/null; then
		stat="${stat##*) }"
		[[ "$stat" != Z* && "$stat" != X* ]]
	else
		[[ "$(ps -o stat= -p "$1" 2>/dev/null)" != Z* ]]
	fi
}

stack_pidfile() { printf '%s/%s.pid\n' "$STACK_PID_DIR" "$1"; }
stack_logfile() { printf '%s/%s.log\n' "$STACK_LOG_DIR" "$1"; }

# A pattern that the command line of each service's group leader matches; used to
# ignore stale pid files whose pid was reused by an unrelated process.
stack_cmd_pattern() {
	case "$1" in
	temporal) echo 'temporal' ;;
	firestore) echo 'firestore' ;;
	bigquery) echo 'bigquery-emulator' ;;
	gemini-standin) echo 'gemini-standin' ;;
	codec-server) echo 'codec-server' ;;
	worker) echo 'worker' ;;
	dev) echo 'dev\.sh' ;;
	*) echo "$1" ;;
	esac
}

# Prints the recorded pid of a service if its process group is still alive.
stack_recorded_pid() { # <name>
	local f pid args
	f="$(stack_pidfile "$1")"
	[[ -f "$f" ]] || return 1
	pid="$(cat "$f" 2>/dev/null || true)"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	if [[ "$1" == dev ]]; then
		stack_pid_alive "$pid" || return 1
	else
		stack_group_alive "$pid" || return 1
	fi
	# The leader may be gone while the group lives on (gcloud -> java); when it
	# is there, make sure it is still what we started.
	if args="$(ps -o args= -p "$pid" 2>/dev/null)" && [[ -n "$args" ]]; then
		[[ "$args" =~ $(stack_cmd_pattern "$1") ]] || return 1
	fi
	printf '%s\n' "$pid"
}

stack_is_started_here() { # <name>
	local s
	for s in "${STACK_STARTED[@]+"${STACK_STARTED[@]}"}"; do
		[[ "$s" == "$1" ]] && return 0
	done
	return 1
}

stack_tail_log() { # <name>
	local log
	log="$(stack_logfile "$1")"
	if [[ -s "$log" ]]; then
		printf -- '----- last 20 lines of %s -----\n' "$log" >&2
		tail -n 20 "$log" >&2
		printf -- '-----\n' >&2
	else
		printf 'stack: (log %s is empty)\n' "$log" >&2
	fi
}

# Starts "$@" in the background in its own process group, logging to
# .data/logs/<name>.log, and records the pid in .data/pids/<name>.pid.
stack_spawn() { # <name> <cmd> [args...]
	local name="$1" log pid had_m=0
	shift
	mkdir -p "$STACK_LOG_DIR" "$STACK_PID_DIR"
	log="$(stack_logfile "$name")"
	printf '# %s: %s\n' "$(date '+%Y-%m-%dT%H:%M:%S%z')" "$*" >"$log"
	[[ $- == *m* ]] && had_m=1
	set -m
	"$@" >>"$log" 2>&1 </dev/null &
	pid=$!
	((had_m)) || set +m
	printf '%s\n' "$pid" >"$(stack_pidfile "$name")"
	STACK_STARTED+=("$name")
	stack_log "started $name (pid $pid, log ${log#"$STACK_ROOT"/})"
}

# Stops a service's whole process group: SIGTERM, then SIGKILL after a timeout.
stack_stop() { # <name>
	local name="$1" pid f deadline
	f="$(stack_pidfile "$name")"
	if ! pid="$(stack_recorded_pid "$name")"; then
		rm -f "$f"
		return 0
	fi
	stack_log "stopping $name (pid $pid)"
	kill -TERM -- "-$pid" 2>/dev/null || true
	deadline=$((SECONDS + STACK_STOP_TIMEOUT))
	while stack_group_alive "$pid"; do
		if ((SECONDS >= deadline)); then
			stack_warn "$name did not stop within ${STACK_STOP_TIMEOUT}s; killing it"
			kill -KILL -- "-$pid" 2>/dev/null || true
			sleep 0.5
			break
		fi
		sleep 0.2
	done
	wait "$pid" 2>/dev/null || true
	rm -f "$f"
}

# Waits until <probe> succeeds; fails if the service's process group dies or the
# timeout passes (then prints the last log lines and stops the service).
stack_wait() { # <name> <timeout-seconds> <probe-function> [probe args...]
	local name="$1" timeout="$2" pid deadline
	shift 2
	pid="$(cat "$(stack_pidfile "$name")")"
	deadline=$((SECONDS + timeout))
	until "$@"; do
		if ! stack_group_alive "$pid"; then
			stack_err "$name exited during startup"
			stack_tail_log "$name"
			stack_stop "$name"
			return 1
		fi
		if ((SECONDS >= deadline)); then
			stack_err "$name was not ready within ${timeout}s"
			stack_tail_log "$name"
			stack_stop "$name"
			return 1
		fi
		sleep 0.2
	done
}

# True when something accepts TCP connections on host:port (bash /dev/tcp).
stack_port_open() { # <port>
	(exec 3<>"/dev/tcp/$STACK_HOST/$1") 2>/dev/null
}

# ---------------------------------------------------------------- Temporal

# The Temporal CLI, pointed at the local dev server regardless of the user's
# Temporal Cloud settings (API key, TLS, config profiles).
stack_temporal_cli() {
	env -u TEMPORAL_API_KEY -u TEMPORAL_TLS -u TEMPORAL_TLS_CERT -u TEMPORAL_TLS_KEY \
		-u TEMPORAL_TLS_CA -u TEMPORAL_TLS_CERT_DATA -u TEMPORAL_TLS_KEY_DATA \
		-u TEMPORAL_TLS_CA_DATA -u TEMPORAL_TLS_SERVER_NAME -u TEMPORAL_PROFILE \
		"$STACK_TEMPORAL_BIN" "$@" \
		--address "$STACK_HOST:$STACK_TEMPORAL_PORT" --namespace "$STACK_NAMESPACE" \
		--disable-config-file --disable-config-env --color never
}

stack_temporal_ready() {
	stack_port_open "$STACK_TEMPORAL_PORT" &&
		stack_temporal_cli operator cluster health --command-timeout 3s >/dev/null 2>&1
}

# The AlertId and Verdict search attributes must exist: on a fresh server
# --search-attribute registers them, on a reused one (or an old
# .data/temporal.db) we make sure. Creating an existing attribute of the same
# type succeeds.
stack_temporal_search_attributes() {
	local out name
	for name in AlertId Verdict; do
		if out="$(stack_temporal_cli operator search-attribute create --name "$name" --type Keyword 2>&1)" ||
			[[ "$out" == *"already exists"* ]]; then
			continue
		fi
		stack_err "could not register search attribute $name (Keyword) on $STACK_HOST:$STACK_TEMPORAL_PORT:"
		printf '%s\n' "$out" >&2
		return 1
	done
}

stack_start_temporal() {
	if stack_temporal_ready; then
		stack_log "Temporal: reusing the server already answering on $STACK_HOST:$STACK_TEMPORAL_PORT$(stack_reuse_note)"
	else
		if stack_port_open "$STACK_TEMPORAL_PORT"; then
			stack_err "port $STACK_TEMPORAL_PORT is in use, but not by a Temporal server that answers health checks"
			return 1
		fi
		if [[ ! -x "$STACK_TEMPORAL_BIN" ]]; then
			stack_err "Temporal CLI not found at $STACK_TEMPORAL_BIN: run 'go tool task setup'"
			return 1
		fi
		mkdir -p "$STACK_DATA_DIR"
		local codec=()
		if [[ -n "${PAYLOAD_KEY_FILE:-}" ]]; then
			codec=(--ui-codec-endpoint "$(stack_codec_url)")
		fi
		stack_spawn temporal "$STACK_TEMPORAL_BIN" server start-dev \
			--ip "$STACK_HOST" --port "$STACK_TEMPORAL_PORT" --ui-port "$STACK_TEMPORAL_UI_PORT" \
			--db-filename "$STACK_DATA_DIR/temporal.db" \
			--search-attribute AlertId=Keyword --search-attribute Verdict=Keyword \
			--dynamic-config-value system.enableActivityEagerExecution=true \
			${codec[@]+"${codec[@]}"} \
			--log-level warn --color never
		stack_wait temporal "$STACK_TEMPORAL_TIMEOUT" stack_temporal_ready || return 1
		stack_log "Temporal: ready on $STACK_HOST:$STACK_TEMPORAL_PORT, Web UI http://localhost:$STACK_TEMPORAL_UI_PORT"
	fi
	stack_check_ui_codec
	stack_temporal_search_attributes
}

# ---------------------------------------------------------------- Firestore

stack_firestore_ready() {
	[[ "$(curl -sf --max-time 2 "http://$STACK_HOST:$STACK_FIRESTORE_PORT/" 2>/dev/null)" == Ok* ]]
}

stack_start_firestore() {
	if stack_firestore_ready; then
		stack_log "Firestore emulator: reusing the one already answering on $STACK_HOST:$STACK_FIRESTORE_PORT$(stack_reuse_note)"
		return 0
	fi
	if stack_port_open "$STACK_FIRESTORE_PORT"; then
		stack_err "port $STACK_FIRESTORE_PORT is in use, but not by the Firestore emulator"
		return 1
	fi
	if ! command -v gcloud >/dev/null 2>&1; then
		stack_err "gcloud not found: the Firestore emulator needs the Google Cloud CLI (see 'go tool task setup')"
		return 1
	fi
	local save="" meta="" import=() from="empty: nothing saved yet"
	if save="$(stack_firestore_latest_save)"; then
		if meta="$(stack_firestore_metadata "$save")"; then
			import=(--import-data="$meta")
			from="data loaded from $(stack_show_path "$save")"
		else
			stack_warn "ignoring $(stack_show_path "$save"): it holds no export metadata file"
		fi
	fi
	stack_spawn firestore gcloud emulators firestore start --host-port="$STACK_HOST:$STACK_FIRESTORE_PORT" \
		${import[@]+"${import[@]}"}
	# What `stop` saves, whatever its own environment says.
	printf '%s\n%s\n' "$GOOGLE_CLOUD_PROJECT" "${FIRESTORE_DATABASE:-(default)}" >"$STACK_PID_DIR/firestore.target"
	if ! stack_wait firestore "$STACK_FIRESTORE_TIMEOUT" stack_firestore_ready; then
		if ((${#import[@]})); then
			stack_err "the Firestore emulator did not start with the data saved in $(stack_show_path "$save"): move that directory away to start with an empty emulator, or run 'go tool task clean' to wipe all local state"
		fi
		return 1
	fi
	stack_log "Firestore emulator: ready on $STACK_HOST:$STACK_FIRESTORE_PORT ($from; saved to $(stack_show_path "$STACK_FIRESTORE_SAVE_DIR") when the stack stops)"
}

# ---------------------------------------------------------------- Firestore data on disk

# A save is the emulator's export (its REST export endpoint, for the stack's
# project and database) written into a temporary directory and then renamed
# to save-N, N one more than the newest: the newest complete save is the
# one loaded, a half-written one is never named save-N, and older saves are
# removed only once a newer one is in place.

stack_firestore_save_number() { # <dir>: prints N of .../save-N
	local n="${1##*/save-}"
	[[ "$n" =~ ^[0-9]+$ ]] || return 1
	printf '%d\n' "$((10#$n))"
}

# Prints the newest complete save, if there is one.
stack_firestore_latest_save() {
	local d n best="" bestn=-1
	for d in "$STACK_FIRESTORE_SAVE_DIR"/save-*; do
		[[ -d "$d" ]] && n="$(stack_firestore_save_number "$d")" || continue
		if ((n > bestn)); then
			bestn=$n
			best="$d"
		fi
	done
	[[ -n "$best" ]] && printf '%s\n' "$best"
}

# The file the emulator's --import-data wants: the export's overall metadata.
stack_firestore_metadata() { # <save dir>
	local f
	for f in "$1"/*/*.overall_export_metadata; do
		if [[ -f "$f" ]]; then
			printf '%s\n' "$f"
			return 0
		fi
	done
	return 1
}

# Saves the emulator's data; on failure the previous save stays as it was.
stack_save_firestore() {
	local project="${GOOGLE_CLOUD_PROJECT:-demo-investigator}" database="${FIRESTORE_DATABASE:-(default)}"
	local d owner tmp code latest n target started=$SECONDS
	if [[ -f "$STACK_PID_DIR/firestore.target" ]]; then
		{ read -r project && read -r database; } <"$STACK_PID_DIR/firestore.target" || true
	fi
	if ! stack_firestore_ready; then
		stack_warn "the Firestore emulator on $STACK_HOST:$STACK_FIRESTORE_PORT does not answer: its data was not saved (the previous save, if any, is kept)"
		return 1
	fi
	mkdir -p "$STACK_FIRESTORE_SAVE_DIR"
	# Left behind by a save that was killed midway.
	for d in "$STACK_FIRESTORE_SAVE_DIR"/.tmp-*; do
		[[ -e "$d" ]] || continue
		owner="${d##*/.tmp-}"
		owner="${owner%%-*}"
		if ! kill -0 "$owner" 2>/dev/null; then
			rm -rf "$d"
		fi
	done
	tmp="$(mktemp -d "$STACK_FIRESTORE_SAVE_DIR/.tmp-$$-XXXXXX")"
	if [[ "$tmp$project$database" == *[\"\\]* ]]; then
		rm -rf "$tmp"
		stack_warn "the Firestore data was not saved: the path $tmp, project or database has a quote or backslash"
		return 1
	fi
	code="$(curl -s -o "$tmp.answer" -w '%{http_code}' --max-time 120 -X POST \
		-H 'Content-Type: application/json' \
		-d "{\"database\":\"projects/$project/databases/$database\",\"export_directory\":\"$tmp\"}" \
		"http://$STACK_HOST:$STACK_FIRESTORE_PORT/emulator/v1/projects/$project:export" 2>/dev/null)" || code="${code:-000}"
	if [[ "$code" != 200 ]] || ! stack_firestore_metadata "$tmp" >/dev/null; then
		stack_warn "the Firestore emulator did not save its data (HTTP $code: $(head -c 300 "$tmp.answer" 2>/dev/null | tr -s '\n' ' ')); the previous save, if any, is kept"
		rm -rf "$tmp" "$tmp.answer"
		return 1
	fi
	rm -f "$tmp.answer"
	n=1
	if latest="$(stack_firestore_latest_save)"; then
		n=$(($(stack_firestore_save_number "$latest") + 1))
	fi
	while target="$STACK_FIRESTORE_SAVE_DIR/save-$n" && [[ -e "$target" ]]; do
		n=$((n + 1))
	done
	mv "$tmp" "$target"
	for d in "$STACK_FIRESTORE_SAVE_DIR"/save-*; do
		[[ -d "$d" ]] && latest="$(stack_firestore_save_number "$d")" || continue
		if ((latest < n)); then
			rm -rf "$d"
		fi
	done
	stack_log "Firestore emulator: data of $project saved to $(stack_show_path "$target") in $((SECONDS - started))s"
}

# ---------------------------------------------------------------- BigQuery

# Ready when the emulator serves the sample dataset. It opens its port only
# after loading data.yaml (about 10 s for the sample), so an answer means loaded.
stack_bigquery_ready() {
	curl -sf --max-time 2 -o /dev/null \
		"http://$STACK_HOST:$STACK_BIGQUERY_PORT/bigquery/v2/projects/$STACK_BIGQUERY_PROJECT/datasets/$STACK_BIGQUERY_DATASET" 2>/dev/null
}

# Starts the emulator without waiting for it, so that its data load overlaps
# with the other services' start; stack_await_bigquery waits for it.
stack_launch_bigquery() {
	STACK_BIGQUERY_PENDING=0
	if stack_bigquery_ready; then
		stack_log "BigQuery emulator: reusing the one already answering on $STACK_HOST:$STACK_BIGQUERY_PORT$(stack_reuse_note)"
		return 0
	fi
	local port
	for port in "$STACK_BIGQUERY_PORT" "$STACK_BIGQUERY_GRPC_PORT"; do
		if stack_port_open "$port"; then
			stack_err "port $port is in use, but not by a BigQuery emulator serving $STACK_BIGQUERY_PROJECT.$STACK_BIGQUERY_DATASET"
			return 1
		fi
	done
	if [[ ! -x "$STACK_BIGQUERY_BIN" ]]; then
		stack_err "BigQuery emulator not found at $STACK_BIGQUERY_BIN: run 'go tool task setup' (a one-time build of about 11 minutes)"
		return 1
	fi
	if [[ ! -f "$STACK_BIGQUERY_DATA" ]]; then
		stack_err "BigQuery sample data not found: $STACK_BIGQUERY_DATA"
		return 1
	fi
	# GODEBUG invalidptr=0: the emulator's ZetaSQL binding keeps small integers
	# in pointer variables, which makes the Go runtime abort at random
	# ("invalid pointer found on stack") unless this check is off.
	stack_spawn bigquery env GODEBUG="${GODEBUG:+$GODEBUG,}invalidptr=0" "$STACK_BIGQUERY_BIN" --project="$STACK_BIGQUERY_PROJECT" \
		--host="$STACK_HOST" --port="$STACK_BIGQUERY_PORT" --grpc-port="$STACK_BIGQUERY_GRPC_PORT" \
		--data-from-yaml="$STACK_BIGQUERY_DATA"
	STACK_BIGQUERY_PENDING=1
}

stack_await_bigquery() {
	((STACK_BIGQUERY_PENDING)) || return 0
	stack_wait bigquery "$STACK_BIGQUERY_TIMEOUT" stack_bigquery_ready || return 1
	STACK_BIGQUERY_PENDING=0
	stack_log "BigQuery emulator: ready on $STACK_HOST:$STACK_BIGQUERY_PORT, $STACK_BIGQUERY_PROJECT.$STACK_BIGQUERY_DATASET loaded from ${STACK_BIGQUERY_DATA#"$STACK_ROOT"/} (in memory: reloaded at every start)"
}

# ---------------------------------------------------------------- Gemini

# Real Gemini (or Vertex AI, or an explicit endpoint) configured in the environment?
stack_gemini_configured() {
	[[ -n "${GEMINI_API_KEY:-}" || -n "${GOOGLE_API_KEY:-}" || -n "${GOOGLE_GEMINI_BASE_URL:-}" ]] && return 0
	case "${GOOGLE_GENAI_USE_VERTEXAI:-}" in
	1 | [Tt][Rr][Uu][Ee]) return 0 ;;
	esac
	return 1
}

stack_standin_ready() {
	# Any HTTP answer will do: the stand-in need not serve "/".
	curl -s -o /dev/null --max-time 2 "http://$STACK_HOST:$STACK_STANDIN_PORT/" 2>/dev/null
}

# Which of the user's settings reaches Gemini (names, never a key).
stack_gemini_via() {
	local via="GEMINI_API_KEY"
	[[ -n "${GOOGLE_API_KEY:-}" ]] && via="GOOGLE_API_KEY"
	[[ -n "${GEMINI_API_KEY:-}" ]] && via="GEMINI_API_KEY"
	[[ -n "${GOOGLE_GEMINI_BASE_URL:-}" ]] && via="GOOGLE_GEMINI_BASE_URL=$GOOGLE_GEMINI_BASE_URL"
	case "${GOOGLE_GENAI_USE_VERTEXAI:-}" in 1 | [Tt][Rr][Uu][Ee]) via="Vertex AI (GOOGLE_GENAI_USE_VERTEXAI)" ;; esac
	printf '%s\n' "$via"
}

stack_start_gemini() {
	if stack_gemini_configured; then
		stack_log "Gemini: using your configuration ($(stack_gemini_via))"
		return 0
	fi
	if stack_standin_ready; then
		stack_log "Gemini stand-in: reusing the one already answering on $STACK_HOST:$STACK_STANDIN_PORT$(stack_reuse_note)"
	else
		if [[ ! -x "$STACK_BIN_DIR/gemini-standin" ]]; then
			stack_err "$STACK_BIN_DIR/gemini-standin not found: run 'go tool task build'"
			return 1
		fi
		stack_spawn gemini-standin "$STACK_BIN_DIR/gemini-standin" --addr "$STACK_HOST:$STACK_STANDIN_PORT"
		stack_wait gemini-standin "$STACK_STANDIN_TIMEOUT" stack_standin_ready || return 1
	fi
	export GOOGLE_GEMINI_BASE_URL="http://$STACK_HOST:$STACK_STANDIN_PORT"
	export GEMINI_API_KEY="offline-standin"
	STACK_USING_STANDIN=1
	stack_warn_standin
}

stack_warn_standin() {
	printf '%s\n' \
		"stack: WARNING: no Gemini credentials (GEMINI_API_KEY, GOOGLE_API_KEY, GOOGLE_GENAI_USE_VERTEXAI," \
		"stack: WARNING: GOOGLE_GEMINI_BASE_URL) are set: model answers are SCRIPTED by the offline Gemini" \
		"stack: WARNING: stand-in at $GOOGLE_GEMINI_BASE_URL, not produced by a real model." \
		"stack: WARNING: Set GEMINI_API_KEY to use Gemini." >&2
}

# ---------------------------------------------------------------- codec server

# With PAYLOAD_KEY_FILE, the worker and the starter encrypt every payload in
# Temporal history; `starter codec-server` decrypts them for the Web UI, which
# the dev server points at it (--ui-codec-endpoint).

stack_codec_url() { printf 'http://%s:%s\n' "$STACK_HOST" "$STACK_CODEC_PORT"; }

stack_codec_ready() {
	# The CORS preflight answers 204 without touching a payload.
	[[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -X OPTIONS \
		-H "Origin: http://localhost:$STACK_TEMPORAL_UI_PORT" -H 'Access-Control-Request-Method: POST' \
		"$(stack_codec_url)/decode" 2>/dev/null)" == 204 ]]
}

stack_start_codec() {
	[[ -n "${PAYLOAD_KEY_FILE:-}" ]] || return 0
	if stack_codec_ready; then
		stack_log "codec server: reusing the one already answering on $(stack_codec_url) (it must hold the same keys)$(stack_reuse_note)"
		return 0
	fi
	if stack_port_open "$STACK_CODEC_PORT"; then
		stack_err "port $STACK_CODEC_PORT is in use, but not by a codec server (move it with STACK_CODEC_PORT)"
		return 1
	fi
	if [[ ! -x "$STACK_BIN_DIR/starter" ]]; then
		stack_err "$STACK_BIN_DIR/starter not found: run 'go tool task build'"
		return 1
	fi
	# The key file is read (and checked) here, before anything else starts.
	stack_spawn codec-server "$STACK_BIN_DIR/starter" codec-server \
		--listen "$STACK_HOST:$STACK_CODEC_PORT" \
		--web-ui-origin "http://localhost:$STACK_TEMPORAL_UI_PORT,http://$STACK_HOST:$STACK_TEMPORAL_UI_PORT" \
		--log-level info
	stack_wait codec-server "$STACK_CODEC_TIMEOUT" stack_codec_ready || return 1
	stack_log "codec server: $(stack_codec_url) decrypts history for the Web UI (keys from $PAYLOAD_KEY_FILE)"
}

# A reused dev server keeps the codec endpoint it was started with: say so
# when it does not match this stack's encryption setting.
stack_check_ui_codec() {
	local settings endpoint
	settings="$(curl -s --max-time 3 "http://$STACK_HOST:$STACK_TEMPORAL_UI_PORT/api/v1/settings" 2>/dev/null)" || return 0
	endpoint="$(printf '%s' "$settings" | sed -n 's/.*"Codec":{"Endpoint":"\([^"]*\)".*/\1/p')"
	if [[ -n "${PAYLOAD_KEY_FILE:-}" && "$endpoint" != "$(stack_codec_url)" ]]; then
		stack_warn "the running Temporal Web UI does not use the codec server (its codec endpoint is '${endpoint}'): it shows encrypted payloads. Stop the stack ('go tool task stop') and start it again with PAYLOAD_KEY_FILE set."
	fi
	return 0
}

# ---------------------------------------------------------------- worker

stack_worker_ready() {
	grep -q 'Started Worker' "$(stack_logfile worker)" 2>/dev/null
}

# What the worker was started with, to tell whether a running one fits this
# run: variable names and paths, never a key.
stack_worker_settings() {
	local v keys=""
	for v in OTX_API_KEY URLSCAN_API_KEY VIRUSTOTAL_API_KEY ABUSEIPDB_API_KEY; do
		[[ -n "${!v:-}" ]] && keys="$keys ${v}"
	done
	if ((STACK_USING_STANDIN)); then
		printf 'Gemini stand-in %s' "$GOOGLE_GEMINI_BASE_URL"
	else
		printf 'Gemini via %s' "$(stack_gemini_via)"
	fi
	printf ', model %s, payload key file %s, intelligence keys:%s\n' \
		"${GEMINI_MODEL:-default}" "${PAYLOAD_KEY_FILE:-none}" "${keys:- none}"
}

# The worker binary's checksum (a build rewrites the file even when its
# content does not change, so its time says nothing).
stack_worker_binary() { cksum <"$STACK_BIN_DIR/worker" 2>/dev/null || true; }

# A worker left running by an earlier run is reused when it runs the current
# binary with this run's settings; otherwise it is restarted (unless a `dev`
# session owns it: that session would take its stop for a crash).
stack_reuse_worker() {
	local pid dev want have reason=""
	pid="$(stack_recorded_pid worker)" || return 1
	want="$(stack_worker_settings)"
	have="$(cat "$STACK_PID_DIR/worker.settings" 2>/dev/null || true)"
	if [[ "$have" != "$want" ]]; then
		reason="it runs with other settings (${have:-unknown}; this run: $want)"
	elif [[ "$(stack_worker_binary)" != "$(cat "$STACK_PID_DIR/worker.binary" 2>/dev/null || true)" ]]; then
		reason="$(stack_show_path "$STACK_BIN_DIR/worker") changed since it started"
	fi
	if [[ -z "$reason" ]]; then
		stack_log "worker: reusing the worker already running (pid $pid)$(stack_reuse_note)"
		return 0
	fi
	if dev="$(stack_recorded_pid dev)"; then
		stack_warn "worker: keeping the worker of the 'go tool task dev' session (pid $dev) although $reason; stop that session to change it"
		return 0
	fi
	stack_log "worker: restarting the worker (pid $pid): $reason"
	stack_stop worker
	return 1
}

stack_start_worker() {
	local pid
	if ! stack_is_started_here worker && stack_reuse_worker; then
		return 0
	fi
	if [[ ! -x "$STACK_BIN_DIR/worker" ]]; then
		stack_err "$STACK_BIN_DIR/worker not found: run 'go tool task build'"
		return 1
	fi
	stack_spawn worker "$STACK_BIN_DIR/worker"
	stack_worker_settings >"$STACK_PID_DIR/worker.settings"
	stack_worker_binary >"$STACK_PID_DIR/worker.binary"
	# The SDK logs "Started Worker" once it polls. Without that line (a quiet
	# logger), a worker still alive after the timeout is taken as started.
	local deadline=$((SECONDS + STACK_WORKER_TIMEOUT))
	pid="$(cat "$(stack_pidfile worker)")"
	until stack_worker_ready; do
		if ! stack_group_alive "$pid"; then
			stack_err "worker exited during startup"
			stack_tail_log worker
			stack_stop worker
			return 1
		fi
		if ((SECONDS >= deadline)); then
			stack_log "worker: running (no 'Started Worker' log line after ${STACK_WORKER_TIMEOUT}s; continuing)"
			return 0
		fi
		sleep 0.2
	done
	stack_log "worker: polling Temporal"
}

# ---------------------------------------------------------------- whole stack

# Environment of the worker and the starter. Temporal Cloud settings (API key,
# TLS) are dropped: this stack is the local dev server.
stack_export_env() {
	local v
	for v in TEMPORAL_API_KEY TEMPORAL_TLS TEMPORAL_TLS_CERT TEMPORAL_TLS_KEY TEMPORAL_TLS_CA \
		TEMPORAL_TLS_CERT_DATA TEMPORAL_TLS_KEY_DATA TEMPORAL_TLS_CA_DATA TEMPORAL_TLS_SERVER_NAME \
		TEMPORAL_PROFILE; do
		if [[ -n "${!v:-}" ]]; then
			stack_log "ignoring $v for the local stack"
			unset "$v"
		fi
	done
	export TEMPORAL_ADDRESS="$STACK_HOST:$STACK_TEMPORAL_PORT"
	export TEMPORAL_NAMESPACE="$STACK_NAMESPACE"
	# The starter's Web UI links point at this stack's Web UI.
	export TEMPORAL_UI_URL="http://localhost:$STACK_TEMPORAL_UI_PORT"
	export FIRESTORE_EMULATOR_HOST="$STACK_HOST:$STACK_FIRESTORE_PORT"
	export GOOGLE_CLOUD_PROJECT="${GOOGLE_CLOUD_PROJECT:-demo-investigator}"
	# The BigQuery sub-agent queries the emulator's sample logs; settings for
	# real BigQuery in the caller's environment do not apply to this stack
	# (STACK_BIGQUERY_TABLES / STACK_BIGQUERY_RUNBOOKS choose other files).
	for v in BIGQUERY_EMULATOR_HOST BIGQUERY_TABLES_CONFIG BIGQUERY_RUNBOOKS_DIR; do
		if [[ -n "${!v:-}" ]]; then
			stack_log "ignoring $v=${!v} for the local stack"
		fi
	done
	export BIGQUERY_EMULATOR_HOST="$STACK_HOST:$STACK_BIGQUERY_PORT"
	export BIGQUERY_TABLES_CONFIG="$STACK_BIGQUERY_TABLES"
	export BIGQUERY_RUNBOOKS_DIR="$STACK_BIGQUERY_RUNBOOKS"
	# The payload key file, from the environment or `go tool task dev
	# PAYLOAD_KEY_FILE=...` (relative to where task was run): absolute, so
	# that every service and .data/stack.env name the same file.
	if [[ -n "${PAYLOAD_KEY_FILE:-}" && "$PAYLOAD_KEY_FILE" != /* ]]; then
		local base="${STACK_USER_CWD:-$PWD}"
		[[ -f "$base/$PAYLOAD_KEY_FILE" ]] || base="$PWD"
		PAYLOAD_KEY_FILE="$(cd "$(dirname "$base/$PAYLOAD_KEY_FILE")" 2>/dev/null && pwd)/$(basename "$PAYLOAD_KEY_FILE")"
	fi
	if [[ -n "${PAYLOAD_KEY_FILE:-}" ]]; then
		export PAYLOAD_KEY_FILE
	else
		unset PAYLOAD_KEY_FILE
	fi
}

# .data/stack.env: what a second terminal needs to run bin/starter against this
# stack. It never holds a real API key.
stack_write_env_file() {
	local f="$STACK_DATA_DIR/stack.env"
	mkdir -p "$STACK_DATA_DIR"
	{
		echo "# Written by scripts/stack.sh: source it to use bin/starter with the local stack."
		echo "export TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS"
		echo "export TEMPORAL_NAMESPACE=$TEMPORAL_NAMESPACE"
		echo "export TEMPORAL_UI_URL=$TEMPORAL_UI_URL"
		echo "export FIRESTORE_EMULATOR_HOST=$FIRESTORE_EMULATOR_HOST"
		echo "export GOOGLE_CLOUD_PROJECT=$GOOGLE_CLOUD_PROJECT"
		echo "export BIGQUERY_EMULATOR_HOST=$BIGQUERY_EMULATOR_HOST"
		printf 'export BIGQUERY_TABLES_CONFIG=%q\n' "$BIGQUERY_TABLES_CONFIG"
		printf 'export BIGQUERY_RUNBOOKS_DIR=%q\n' "$BIGQUERY_RUNBOOKS_DIR"
		if ((STACK_USING_STANDIN)); then
			echo "export GOOGLE_GEMINI_BASE_URL=$GOOGLE_GEMINI_BASE_URL"
			echo "export GEMINI_API_KEY=$GEMINI_API_KEY"
		fi
		# The path only, never a key.
		if [[ -n "${PAYLOAD_KEY_FILE:-}" ]]; then
			printf 'export PAYLOAD_KEY_FILE=%q\n' "$PAYLOAD_KEY_FILE"
		fi
	} >"$f"
}

# The ports of this stack, as shell assignments: recorded under .data/pids so
# that `stop`, `save` and `status` reach the running stack whatever their own
# environment says.
stack_ports() {
	local v
	for v in STACK_TEMPORAL_PORT STACK_TEMPORAL_UI_PORT STACK_FIRESTORE_PORT STACK_STANDIN_PORT \
		STACK_BIGQUERY_PORT STACK_BIGQUERY_GRPC_PORT STACK_CODEC_PORT; do
		printf '%s=%s\n' "$v" "${!v}"
	done
}

stack_load_ports() {
	local line
	[[ -f "$STACK_PID_DIR/ports" ]] || return 0
	while IFS= read -r line; do
		[[ "$line" =~ ^(STACK_[A-Z_]+_PORT)=([0-9]+)$ ]] && printf -v "${BASH_REMATCH[1]}" '%s' "${BASH_REMATCH[2]}"
	done <"$STACK_PID_DIR/ports"
	return 0
}

# Services recorded under .data/pids that still run belong to a stack on the
# recorded ports: starting one on other ports would lose track of them.
stack_check_ports() {
	local name pid running=""
	[[ -f "$STACK_PID_DIR/ports" ]] || return 0
	[[ "$(cat "$STACK_PID_DIR/ports")" == "$(stack_ports)" ]] && return 0
	for name in dev temporal firestore bigquery gemini-standin codec-server worker; do
		# dev.sh records itself before it starts the stack.
		if pid="$(stack_recorded_pid "$name")" && [[ "$pid" != "$$" ]]; then
			running="$running $name"
		fi
	done
	[[ -z "$running" ]] && return 0
	stack_err "a stack on other ports is running from $(stack_show_path "$STACK_DATA_DIR") (${running# }; ports in $(stack_show_path "$STACK_PID_DIR/ports")): stop it first with 'go tool task stop', or use the same STACK_*_PORT settings"
	return 1
}

# Starts (or reuses) every service. Returns non-zero, after printing why, if one
# fails; the caller's EXIT trap (stack_cleanup) stops what was started.
stack_up() {
	local started=$SECONDS
	mkdir -p "$STACK_LOG_DIR" "$STACK_PID_DIR"
	stack_check_ports || return 1
	stack_ports >"$STACK_PID_DIR/ports"
	stack_export_env
	stack_start_codec || return 1
	stack_launch_bigquery || return 1
	stack_start_temporal || return 1
	stack_start_firestore || return 1
	stack_await_bigquery || return 1
	stack_start_gemini || return 1
	stack_start_worker || return 1
	stack_write_env_file
	stack_log "stack up in $((SECONDS - started))s: Temporal $TEMPORAL_ADDRESS (Web UI http://localhost:$STACK_TEMPORAL_UI_PORT), Firestore emulator $FIRESTORE_EMULATOR_HOST, project $GOOGLE_CLOUD_PROJECT, BigQuery emulator $BIGQUERY_EMULATOR_HOST${PAYLOAD_KEY_FILE:+, payloads encrypted (codec server $(stack_codec_url))}"
}

# Stops a service; the Firestore emulator's data is saved first (unless
# STACK_SAVE_ON_STOP=0, as for `clean`).
stack_stop_service() { # <name>
	if [[ "$1" == firestore && "${STACK_SAVE_ON_STOP:-1}" != 0 ]] && stack_recorded_pid firestore >/dev/null; then
		stack_save_firestore || true
	fi
	stack_stop "$1"
}

# Stops, in reverse order, only the services this shell started.
stack_cleanup() {
	local i
	for ((i = ${#STACK_STARTED[@]} - 1; i >= 0; i--)); do
		stack_stop_service "${STACK_STARTED[$i]}"
	done
	STACK_STARTED=()
}

# For `task stop`: stop a `task dev` session (it stops its own services), then
# everything else recorded under .data/pids: what `investigate` left running,
# or what a killed session left behind.
stack_stop_recorded() {
	local pid name deadline any=0
	if pid="$(stack_recorded_pid dev)"; then
		any=1
		stack_log "stopping the 'task dev' session (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		deadline=$((SECONDS + STACK_STOP_TIMEOUT * 4))
		while stack_pid_alive "$pid" && ((SECONDS < deadline)); do
			sleep 0.2
		done
	fi
	rm -f "$(stack_pidfile dev)"
	# The worker first, so that nothing writes to Firestore while it is saved.
	for name in worker gemini-standin bigquery firestore temporal codec-server; do
		if stack_recorded_pid "$name" >/dev/null; then
			any=1
			stack_stop_service "$name"
		fi
		rm -f "$(stack_pidfile "$name")"
	done
	((any)) || stack_log "nothing recorded under $(stack_show_path "$STACK_PID_DIR") is running"
	return 0
}

# For `task clean`: stop everything without saving, then remove the local
# state (Temporal's database, the Firestore saves, logs, pids, stack.env).
# Only the stack's own entries are removed, then the directory if empty.
stack_clean() {
	STACK_SAVE_ON_STOP=0 stack_stop_recorded
	[[ -d "$STACK_DATA_DIR" ]] || return 0
	rm -rf "$STACK_DATA_DIR"/temporal.db "$STACK_DATA_DIR"/temporal.db-* "$STACK_FIRESTORE_SAVE_DIR" \
		"$STACK_LOG_DIR" "$STACK_PID_DIR" "$STACK_DATA_DIR/stack.env"
	rmdir "$STACK_DATA_DIR" 2>/dev/null || stack_log "kept $(stack_show_path "$STACK_DATA_DIR"): it holds files the stack did not write"
	stack_log "removed the local state (Temporal history, Firestore data, logs)"
}

stack_status() {
	local name pid save
	for name in dev temporal firestore bigquery gemini-standin codec-server worker; do
		if pid="$(stack_recorded_pid "$name")"; then
			printf '%-15s running (pid %s)\n' "$name" "$pid"
		else
			printf '%-15s not running (from %s)\n' "$name" "$(stack_show_path "$STACK_PID_DIR")"
		fi
	done
	stack_temporal_ready && echo "port $STACK_TEMPORAL_PORT: Temporal answers" || echo "port $STACK_TEMPORAL_PORT: no Temporal"
	stack_firestore_ready && echo "port $STACK_FIRESTORE_PORT: Firestore emulator answers" || echo "port $STACK_FIRESTORE_PORT: no Firestore emulator"
	stack_bigquery_ready && echo "port $STACK_BIGQUERY_PORT: BigQuery emulator answers ($STACK_BIGQUERY_PROJECT.$STACK_BIGQUERY_DATASET)" || echo "port $STACK_BIGQUERY_PORT: no BigQuery emulator"
	stack_standin_ready && echo "port $STACK_STANDIN_PORT: something answers HTTP (Gemini stand-in?)" || echo "port $STACK_STANDIN_PORT: nothing"
	stack_codec_ready && echo "port $STACK_CODEC_PORT: codec server answers" || echo "port $STACK_CODEC_PORT: no codec server"
	if save="$(stack_firestore_latest_save)"; then
		echo "Firestore data: last saved in $(stack_show_path "$save") ($(date -r "$save" '+%Y-%m-%d %H:%M:%S' 2>/dev/null || echo 'time unknown'))"
	else
		echo "Firestore data: nothing saved yet"
	fi
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	set -euo pipefail
	stack_load_ports
	case "${1:-}" in
	stop) stack_stop_recorded ;;
	status) stack_status ;;
	save)
		if ! stack_recorded_pid firestore >/dev/null; then
			stack_err "no Firestore emulator started by the stack is running (see 'go tool task status')"
			exit 1
		fi
		stack_save_firestore
		;;
	clean) stack_clean ;;
	*)
		echo "usage: bash scripts/stack.sh stop|status|save|clean   (otherwise: source it)" >&2
		exit 2
		;;
	esac
fi
