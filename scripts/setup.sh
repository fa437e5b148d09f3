#!/usr/bin/env bash
# Installs or checks the local tools the project needs, outside the clone:
#   - Temporal CLI (dev server + Web UI), built from source with the Go toolchain
#     and cached in ${XDG_CACHE_HOME:-$HOME/.cache}/investigator/bin;
#   - the official Firestore emulator (gcloud component + Java), checked only:
#     it cannot be installed from here.
# Idempotent, never reads stdin, prints what it does. Safe to run on every task.
set -euo pipefail

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/investigator"
CACHE_BIN="$CACHE/bin"

# Pinned: @latest and v1.6.0..v1.8.2 do not install through the module proxy
# (their go.mod carries a local replace directive).
TEMPORAL_CLI_MODULE="github.com/temporalio/cli"
TEMPORAL_CLI_VERSION="v1.5.1"
TEMPORAL_BIN="$CACHE_BIN/temporal"

log()  { printf 'setup: %s\n' "$*"; }
fail() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }

# Version of the main module a Go binary was built from ("" when unknown).
# `go version -m` reads the embedded build info; it takes a few milliseconds.
go_binary_module_version() { # <binary> <module>
	go version -m "$1" 2>/dev/null | awk -v m="$2" '$1 == "mod" && $2 == m { print $3; exit }'
}

check_go() {
	command -v go >/dev/null 2>&1 || fail "Go is not on PATH (Go 1.26 is required)."
	log "Go: $(go version)"
}

# Serialize concurrent runs (e.g. `task test` and `task investigate` at once) so
# that only one of them builds the Temporal CLI. flock is absent on macOS: skip.
take_lock() {
	mkdir -p "$CACHE_BIN"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$CACHE/.setup.lock"
		if ! flock -n 9; then
			log "another setup is running (lock $CACHE/.setup.lock); waiting for it..."
			flock 9
		fi
	fi
}

setup_temporal_cli() {
	local have=""
	if [[ -x "$TEMPORAL_BIN" ]]; then
		have="$(go_binary_module_version "$TEMPORAL_BIN" "$TEMPORAL_CLI_MODULE")"
		if [[ "$have" == "$TEMPORAL_CLI_VERSION" ]]; then
			log "Temporal CLI $TEMPORAL_CLI_VERSION: cached at $TEMPORAL_BIN"
			return 0
		fi
		log "Temporal CLI at $TEMPORAL_BIN is version '${have:-unknown}', want $TEMPORAL_CLI_VERSION: rebuilding"
	fi

	log "building Temporal CLI $TEMPORAL_CLI_VERSION from source into $CACHE_BIN"
	log "  (one-time, about 4 minutes and ~250 MB; later runs reuse the cached binary)"
	# Build into a private directory, then move into place, so that an interrupted
	# or concurrent build never leaves a half-written binary at $TEMPORAL_BIN.
	local tmp started
	tmp="$(mktemp -d "$CACHE_BIN/.build.XXXXXX")"
	# shellcheck disable=SC2064 # expand $tmp now
	trap "rm -rf '$tmp'" EXIT
	started=$(date +%s)
	# GOFLAGS is cleared so that a user's -mod=vendor or similar does not leak in;
	# the @version form ignores the current module.
	if ! GOFLAGS="" GOBIN="$tmp" go install "$TEMPORAL_CLI_MODULE/cmd/temporal@$TEMPORAL_CLI_VERSION"; then
		fail "could not build the Temporal CLI ($TEMPORAL_CLI_MODULE@$TEMPORAL_CLI_VERSION). It needs the Go module proxy (GOPROXY=$(go env GOPROXY))."
	fi
	mv -f "$tmp/temporal" "$TEMPORAL_BIN"
	rm -rf "$tmp"
	trap - EXIT
	log "Temporal CLI built in $(( $(date +%s) - started ))s: $TEMPORAL_BIN"
}

# Locate the Cloud SDK root quickly: follow the gcloud symlink to <root>/bin/gcloud
# (instant), falling back to `gcloud info` (about 0.5 s, offline-safe).
gcloud_sdk_root() {
	local g dir
	g="$(command -v gcloud)"
	# Resolve symlinks by hand (readlink -f is missing on older macOS).
	while [[ -L "$g" ]]; do
		dir="$(cd "$(dirname "$g")" && pwd)"
		g="$(readlink "$g")"
		[[ "$g" == /* ]] || g="$dir/$g"
	done
	dir="$(cd "$(dirname "$g")/.." && pwd)"
	if [[ -d "$dir/platform" ]]; then
		printf '%s\n' "$dir"
		return 0
	fi
	gcloud info --format='value(installation.sdk_root)' 2>/dev/null
}

check_firestore_emulator() {
	local hint="The Firestore emulator comes with the Google Cloud CLI: install it, then run
    gcloud components install cloud-firestore-emulator
  (or, for apt installs: apt-get install google-cloud-cli-firestore-emulator default-jre).
  This script cannot install it for you."
	if ! command -v gcloud >/dev/null 2>&1; then
		fail "gcloud (Google Cloud CLI) is not on PATH; it runs the Firestore emulator.
  $hint"
	fi
	if ! command -v java >/dev/null 2>&1; then
		fail "java is not on PATH; the Firestore emulator needs a Java runtime (17+; 21+ recommended).
  $hint"
	fi
	local root jar
	root="$(gcloud_sdk_root)"
	jar="$root/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar"
	if [[ -z "$root" || ! -f "$jar" ]]; then
		fail "the Firestore emulator component is not installed (looked for ${jar:-<sdk root>/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar}).
  $hint"
	fi
	log "Firestore emulator: $jar ($(java -version 2>&1 | head -n 1))"
}

# Placeholder: the BigQuery emulator (goccy/bigquery-emulator v0.6.6) will be built
# here and cached as $CACHE_BIN/bigquery-emulator. It needs clang and ~11 minutes,
# so it is not part of setup yet.
setup_bigquery_emulator() {
	: # TODO(bigquery-emulator): build and cache the emulator binary here.
}

check_misc() {
	command -v curl >/dev/null 2>&1 || fail "curl is not on PATH (used to probe the local services)."
}

main() {
	local started
	started=$(date +%s)
	check_go
	check_misc
	# Fail fast on what cannot be installed from here, before the long build.
	check_firestore_emulator
	take_lock
	setup_temporal_cli
	setup_bigquery_emulator
	log "done in $(( $(date +%s) - started ))s (tool cache: $CACHE_BIN)"
}

main "$@"
