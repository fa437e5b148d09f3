#!/usr/bin/env bash
# Installs or checks the local tools the project needs, outside the clone:
#   - Temporal CLI (dev server + Web UI), built from source with the Go toolchain
#     and cached in ${XDG_CACHE_HOME:-$HOME/.cache}/investigator/bin;
#   - the official Firestore emulator (gcloud component + Java), checked only:
#     it cannot be installed from here;
#   - the BigQuery emulator (goccy/bigquery-emulator), built from source with
#     clang (installed with apt-get when missing, which needs root) and cached
#     next to the Temporal CLI. The first build takes about 10 minutes and up to
#     ~7 GB of memory;
#   - Chromium (Debian's package, about a minute), for the test that checks the
#     Web UI decrypts history through the codec server: installed with apt-get
#     when this runs as root, otherwise skipped with a message (that test then
#     skips itself).
# `setup.sh cluster` instead builds the local cluster's Temporal server, SQL
# schema tool and Web UI server (go tool task cluster).
# Idempotent, never reads stdin, prints what it does. Safe to run on every task.
set -euo pipefail

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/investigator"
CACHE_BIN="$CACHE/bin"

# Pinned: @latest and v1.6.0..v1.8.2 do not install through the module proxy
# (their go.mod carries a local replace directive).
TEMPORAL_CLI_MODULE="github.com/temporalio/cli"
TEMPORAL_CLI_VERSION="v1.5.1"
TEMPORAL_BIN="$CACHE_BIN/temporal"

# The module proxy refuses this module's version list, so `go install ...@v0.6.6`
# fails: the source is fetched with `go mod download` and built in a copy.
BQ_EMULATOR_MODULE="github.com/goccy/bigquery-emulator"
BQ_EMULATOR_VERSION="v0.6.6"
BQ_EMULATOR_BIN="$CACHE_BIN/bigquery-emulator"

log()  { printf 'setup: %s\n' "$*"; }
fail() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }

# Version of the main module a Go binary was built from ("" when unknown).
# `go version -m` reads the embedded build info; it takes a few milliseconds.
# Always succeeds: a truncated or foreign file (go version -m fails) is
# "unknown", so the caller rebuilds it instead of exiting under set -e.
go_binary_module_version() { # <binary> <module>
	{ go version -m "$1" 2>/dev/null || true; } | awk -v m="$2" '$1 == "mod" && $2 == m { print $3; exit }'
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
		log "Temporal CLI at $TEMPORAL_BIN is version '${have:-unknown (unreadable: a broken or truncated file?)}', want $TEMPORAL_CLI_VERSION: rebuilding"
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

# Version a BigQuery emulator binary reports ("" when it was built without
# -X main.version, e.g. by hand from the same source; such a build is kept).
# Fails when the binary does not run (e.g. truncated by an interrupted copy):
# its empty output then says nothing about the build.
bq_emulator_version() { # <binary>
	# Output: "version: v0.6.6 (rev)", or "version:  ()" without -X main.version.
	local out
	out="$("$1" --version 2>/dev/null </dev/null)" || return 1
	printf '%s\n' "$out" | awk '$1 == "version:" { if ($2 !~ /^\(/) print $2; exit }'
}

# ZetaSQL (inside the emulator) compiles with clang only; gcc fails on it.
ensure_clang() {
	if command -v clang >/dev/null 2>&1 && command -v clang++ >/dev/null 2>&1; then
		log "clang: $(clang --version 2>/dev/null | head -n 1)"
		return 0
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		fail "clang (with clang++) is not on PATH; the BigQuery emulator build needs it (gcc cannot compile ZetaSQL).
  Install clang with your package manager (macOS: xcode-select --install), then rerun."
	fi
	local sudo=()
	if [[ "$(id -u)" != 0 ]]; then
		if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
			sudo=(sudo -n)
		else
			fail "clang is not installed, and installing it needs root. Run
    sudo apt-get install -y clang
  then rerun this setup. (The BigQuery emulator build needs clang: gcc cannot compile ZetaSQL.)"
		fi
	fi
	log "clang is not installed: installing it with apt-get (needs root; the BigQuery emulator build needs clang)"
	if ! DEBIAN_FRONTEND=noninteractive ${sudo[@]+"${sudo[@]}"} apt-get install -y -q clang </dev/null; then
		log "apt-get install failed; refreshing the package lists and retrying"
		DEBIAN_FRONTEND=noninteractive ${sudo[@]+"${sudo[@]}"} apt-get update -q </dev/null ||
			fail "apt-get update failed; install clang yourself (apt-get install -y clang) and rerun."
		DEBIAN_FRONTEND=noninteractive ${sudo[@]+"${sudo[@]}"} apt-get install -y -q clang </dev/null ||
			fail "could not install clang with apt-get; install it yourself (apt-get install -y clang) and rerun."
	fi
	command -v clang++ >/dev/null 2>&1 || fail "clang was installed but clang++ is not on PATH."
	log "clang: $(clang --version 2>/dev/null | head -n 1)"
}

# Warn (only) when the machine looks too small for the ZetaSQL compile.
bq_check_memory() {
	local kb
	[[ -r /proc/meminfo ]] || return 0
	kb="$(awk '$1 == "MemAvailable:" { print $2; exit }' /proc/meminfo)"
	[[ "$kb" =~ ^[0-9]+$ ]] || return 0
	if ((kb < 7 * 1024 * 1024)); then
		log "WARNING: only $((kb / 1024)) MiB of memory available; the BigQuery emulator build peaks at about 6.8 GB and may be killed."
	fi
}

setup_bigquery_emulator() {
	local have=""
	if [[ -x "$BQ_EMULATOR_BIN" ]]; then
		if ! have="$(bq_emulator_version "$BQ_EMULATOR_BIN")"; then
			log "BigQuery emulator at $BQ_EMULATOR_BIN does not run ($BQ_EMULATOR_BIN --version failed; a broken or truncated file?): rebuilding"
		elif [[ -z "$have" || "$have" == "$BQ_EMULATOR_VERSION" ]]; then
			log "BigQuery emulator ${have:-$BQ_EMULATOR_VERSION (unversioned build)}: cached at $BQ_EMULATOR_BIN"
			return 0
		else
			log "BigQuery emulator at $BQ_EMULATOR_BIN is version '$have', want $BQ_EMULATOR_VERSION: rebuilding"
		fi
	fi

	ensure_clang
	bq_check_memory
	log "building the BigQuery emulator $BQ_EMULATOR_VERSION ($BQ_EMULATOR_MODULE) from source into $CACHE_BIN"
	log "  (one-time, about 10 minutes, up to ~7 GB of memory and several GB of Go build cache:"
	log "   it compiles Google's ZetaSQL with clang and prints little meanwhile; later runs reuse the cached binary)"
	local tmp started src json ticker=""
	tmp="$(mktemp -d "$CACHE_BIN/.build-bigquery.XXXXXX")"
	# shellcheck disable=SC2064 # expand $tmp now; $ticker is read when the trap runs
	trap "[[ -n \"\${ticker:-}\" ]] && kill \"\$ticker\" 2>/dev/null; chmod -R u+w '$tmp' 2>/dev/null; rm -rf '$tmp'" EXIT
	started=$(date +%s)

	# Fetch the module source into the module cache from a throwaway module, so
	# that the project's go.mod and go.sum are never touched.
	mkdir -p "$tmp/fetch"
	printf 'module investigator.local/fetch-bigquery-emulator\n\ngo 1.21\n' >"$tmp/fetch/go.mod"
	log "  fetching $BQ_EMULATOR_MODULE@$BQ_EMULATOR_VERSION through the Go module proxy"
	if ! json="$(cd "$tmp/fetch" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "$BQ_EMULATOR_MODULE@$BQ_EMULATOR_VERSION")"; then
		fail "could not download $BQ_EMULATOR_MODULE@$BQ_EMULATOR_VERSION. It needs the Go module proxy (GOPROXY=$(go env GOPROXY))."
	fi
	src="$(printf '%s\n' "$json" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p' | head -n 1)"
	[[ -n "$src" && -d "$src" ]] || fail "go mod download did not report a source directory for $BQ_EMULATOR_MODULE@$BQ_EMULATOR_VERSION:
$json"

	# The module cache is read-only: build in a writable copy.
	cp -R "$src" "$tmp/src"
	chmod -R u+w "$tmp/src"
	log "  compiling (started $(date '+%H:%M:%S'); a progress line follows every minute)"
	(
		# Short sleeps without a copy of stdout/stderr or of the setup lock:
		# killing this loop leaves nothing holding the caller's pipe or the
		# lock, and no process for long.
		exec 9>&-
		n=0
		while sleep 5 >/dev/null 2>&1; do
			n=$((n + 5))
			((n % 60)) || log "  ... still compiling the BigQuery emulator ($((n / 60)) min so far)"
		done
	) &
	ticker=$!
	if ! (cd "$tmp/src" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=1 CC=clang CXX=clang++ \
		go build -ldflags "-X main.version=$BQ_EMULATOR_VERSION" -o "$tmp/bigquery-emulator" ./cmd/bigquery-emulator); then
		fail "could not build the BigQuery emulator (see the compiler output above). It needs clang, about 7 GB of memory and the Go module proxy."
	fi
	kill "$ticker" 2>/dev/null || true
	wait "$ticker" 2>/dev/null || true
	ticker=""
	"$tmp/bigquery-emulator" --version >/dev/null 2>&1 || fail "the freshly built BigQuery emulator does not run: $tmp/bigquery-emulator --version failed."
	mv -f "$tmp/bigquery-emulator" "$BQ_EMULATOR_BIN"
	chmod -R u+w "$tmp" 2>/dev/null || true
	rm -rf "$tmp"
	trap - EXIT
	log "BigQuery emulator built in $(($(date +%s) - started))s: $BQ_EMULATOR_BIN"
}

# Chromium drives the Web UI check of the e2e tests (over the DevTools
# protocol). Optional: without it that one check skips.
setup_chromium() {
	local c
	for c in chromium chromium-browser google-chrome; do
		if command -v "$c" >/dev/null 2>&1; then
			log "Chromium: $(command -v "$c")"
			return 0
		fi
	done
	if ! command -v apt-get >/dev/null 2>&1 || [[ "$(id -u)" != 0 ]]; then
		log "Chromium is not installed and this setup is not root with apt-get: skipping it (the Web UI check of the e2e tests will skip; install it with: sudo apt-get install -y chromium)"
		return 0
	fi
	log "installing Chromium with apt-get (about a minute; for the e2e Web UI check)"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium </dev/null >/dev/null; then
		log "apt-get install failed; refreshing the package lists and retrying"
		if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null >/dev/null &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium </dev/null >/dev/null; }; then
			log "WARNING: could not install Chromium with apt-get; the Web UI check of the e2e tests will skip"
			return 0
		fi
	fi
	log "Chromium: $(command -v chromium)"
}

# The Pub/Sub emulator runs the intake's tests and the local stack's
# topics (issue 20). The gcloud CLI finds it in its platform directory.
setup_pubsub_emulator() {
	local gcloud root
	gcloud=$(command -v gcloud 2>/dev/null) || return 0 # check_firestore_emulator named gcloud already
	root=$(dirname "$(dirname "$(readlink -f "$gcloud")")")
	if [[ -d "$root/platform/pubsub-emulator" ]]; then
		log "Pub/Sub emulator: $root/platform/pubsub-emulator"
		return 0
	fi
	if ! command -v apt-get >/dev/null 2>&1 || [[ "$(id -u)" != 0 ]]; then
		fail "the Pub/Sub emulator is not installed in $root (the intake's tests and the local stack need it); install it with: sudo apt-get install -y google-cloud-cli-pubsub-emulator"
	fi
	log "installing the Pub/Sub emulator with apt-get (google-cloud-cli-pubsub-emulator)"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q google-cloud-cli-pubsub-emulator </dev/null >/dev/null; then
		log "apt-get install failed; refreshing the package lists and retrying"
		if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null >/dev/null &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q google-cloud-cli-pubsub-emulator </dev/null >/dev/null; }; then
			fail "could not install google-cloud-cli-pubsub-emulator with apt-get"
		fi
	fi
	[[ -d "$root/platform/pubsub-emulator" ]] || fail "google-cloud-cli-pubsub-emulator is installed but $root/platform/pubsub-emulator is missing"
	log "Pub/Sub emulator: $root/platform/pubsub-emulator"
}

# The production-shaped local cluster (go tool task cluster, design/deploy.md):
# the Temporal server (its four services), its SQL schema tool and the Web UI
# server, built from source like the CLI. v1.31.0, not the v1.29.1 the CLI
# v1.5.1 embeds: 1.29 ignores a continue-as-new's initial versioning
# behaviour, so an idle investigation would stay pinned to its old version
# instead of moving at its continue-as-new (design/versioning.md, the
# rolling upgrade test). The UI server v2.42.1 is the CLI's (its modules are
# in the cache once the CLI is built). Only `setup.sh cluster` builds them:
# the test suite does not need them.
TEMPORAL_SERVER_MODULE="go.temporal.io/server"
TEMPORAL_SERVER_VERSION="v1.31.0"
TEMPORAL_UI_MODULE="github.com/temporalio/ui-server/v2"
TEMPORAL_UI_VERSION="v2.42.1"

# go_tool <module> <version> <package> <name>: builds package@version into
# $CACHE_BIN/<name> unless a binary of that module version is there.
go_tool() {
	local module="$1" version="$2" pkg="$3" name="$4" have tmp started
	if [[ -x "$CACHE_BIN/$name" ]]; then
		have="$(go_binary_module_version "$CACHE_BIN/$name" "$module")"
		if [[ "$have" == "$version" ]]; then
			log "$name $version: cached at $CACHE_BIN/$name"
			return 0
		fi
		log "$name at $CACHE_BIN/$name is version '${have:-unknown}', want $version: rebuilding"
	fi
	log "building $name ($pkg@$version) into $CACHE_BIN (one-time)"
	tmp="$(mktemp -d "$CACHE_BIN/.build.XXXXXX")"
	# shellcheck disable=SC2064 # expand $tmp now
	trap "rm -rf '$tmp'" EXIT
	started=$(date +%s)
	if ! GOFLAGS="" GOBIN="$tmp" go install "$pkg@$version"; then
		fail "could not build $pkg@$version. It needs the Go module proxy (GOPROXY=$(go env GOPROXY))."
	fi
	mv -f "$tmp/$(basename "$pkg")" "$CACHE_BIN/$name"
	rm -rf "$tmp"
	trap - EXIT
	log "$name built in $(($(date +%s) - started))s: $CACHE_BIN/$name"
}

setup_cluster() {
	[[ -x /usr/lib/postgresql/15/bin/postgres ]] || command -v postgres >/dev/null 2>&1 ||
		fail "PostgreSQL's server is not installed (looked for /usr/lib/postgresql/15/bin/postgres); install it with: sudo apt-get install -y postgresql-15"
	go_tool "$TEMPORAL_SERVER_MODULE" "$TEMPORAL_SERVER_VERSION" "$TEMPORAL_SERVER_MODULE/cmd/server" temporal-server
	go_tool "$TEMPORAL_SERVER_MODULE" "$TEMPORAL_SERVER_VERSION" "$TEMPORAL_SERVER_MODULE/cmd/tools/sql" temporal-sql-tool
	go_tool "$TEMPORAL_UI_MODULE" "$TEMPORAL_UI_VERSION" "$TEMPORAL_UI_MODULE/cmd/server" temporal-ui-server
}

check_misc() {
	command -v curl >/dev/null 2>&1 || fail "curl is not on PATH (used to probe the local services)."
}

main() {
	local started
	if [[ "${1:-}" == cluster ]]; then
		started=$(date +%s)
		check_go
		take_lock
		setup_cluster
		log "cluster tools done in $(($(date +%s) - started))s (tool cache: $CACHE_BIN)"
		return 0
	fi
	started=$(date +%s)
	check_go
	check_misc
	# Fail fast on what cannot be installed from here, before the long build.
	check_firestore_emulator
	# The lock before any apt-get: two setups installing at once collide on
	# dpkg's own lock and one fails.
	take_lock
	setup_pubsub_emulator
	setup_temporal_cli
	setup_bigquery_emulator
	setup_chromium
	log "done in $(( $(date +%s) - started ))s (tool cache: $CACHE_BIN)"
}

main "$@"
