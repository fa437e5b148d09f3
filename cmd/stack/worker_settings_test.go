package main

import (
	"crypto/sha256"
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// envReaders are the functions through which the worker's code reads a
// variable (os, config and telemetry helpers).
var envReaders = []string{"Getenv", "LookupEnv", "Env", "EnvBoolVar", "envIntVar", "envFloatVar", "envDurationVar", "envValue"}

// secretName are the names of variables that hold secrets.
var secretName = regexp.MustCompile(`KEY|WEBHOOK|_URL|TOKEN|SECRET|PASSWORD|HEADERS`)

// pathName are those naming a file (INTAKE_TOKEN_FILE), shown in clear.
var pathName = regexp.MustCompile(`_(FILE|PATH)$`)

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$`)

// readsVars lists the variables a program's own code reads: every
// NAME_LIKE string in a non-test file, of the module's packages the
// program (pkg, "worker" or "starter") is built from, that reads the
// environment.
func readsVars(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{with .Module}}{{if eq .Path "github.com/secops-agent/investigator"}}{{$.Dir}}{{end}}{{end}}`,
		"github.com/secops-agent/investigator/"+pkg)
	dirs, err := cmd.Output()
	require.NoError(t, err, "go list")
	found := map[string]bool{}
	fset := token.NewFileSet()
	for _, dir := range strings.Fields(string(dirs)) {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			require.NoError(t, err)
			reads := false
			var names []string
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					name := ""
					switch fn := n.Fun.(type) {
					case *ast.Ident:
						name = fn.Name
					case *ast.SelectorExpr:
						name = fn.Sel.Name
					case *ast.IndexExpr: // envValue[T]
						if id, ok := fn.X.(*ast.Ident); ok {
							name = id.Name
						}
					}
					reads = reads || slices.Contains(envReaders, name)
				case *ast.BasicLit:
					if v, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && envName.MatchString(v) {
						names = append(names, v)
					}
				}
				return true
			})
			if reads {
				for _, n := range names {
					found[n] = true
				}
			}
		}
	}
	var out []string
	for n := range found {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestWorkerSettingsCoverItsVariables: every variable the worker reads, set
// by the caller to a new value, makes a recorded worker unfit (restarted),
// unless the stack drops it or sets it itself; a secret's value never
// appears in the recorded settings. The list comes from the worker's
// source, so a new variable cannot be forgotten. A worker started before
// TEMPORAL_TASK_QUEUE, FIRESTORE_DATABASE, INTEL_RATE_LIMITS or
// TEMPORAL_WORKER_BUILD_ID was set was reused.
func TestWorkerSettingsCoverItsVariables(t *testing.T) {
	vars := readsVars(t, "worker")
	for _, v := range []string{"TEMPORAL_TASK_QUEUE", "FIRESTORE_DATABASE", "INTEL_RATE_LIMITS", "TEMPORAL_WORKER_BUILD_ID", "WORKER_STOP_TIMEOUT", "OTEL_SDK_DISABLED", "SLACK_WEBHOOK_URL"} {
		require.Contains(t, vars, v, "the scan finds the worker's variables")
	}
	settingsCover(t, vars, workerSettings)
}

// TestIntakeSettingsCoverItsVariables: the same for the intakes (bin/starter
// intake), from the starter's source: the variables of the packages it is
// built from, less those the starter's own code reads only outside
// `starter intake` (the codec server's, `intake publish`'s INTAKE_TOPIC).
// Before, an intake's settings were its arguments only: one started with
// another PUBSUB_EMULATOR_HOST, GOOGLE_GEMINI_BASE_URL, payload key file
// or OTEL_* setting was reused; then an exported CODEC_SERVER_TOKEN
// restarted it though it never reads it.
func TestIntakeSettingsCoverItsVariables(t *testing.T) {
	reach, all := intakeOwnVars(t)
	for _, v := range []string{"INTAKE_SUBSCRIPTION", "INTAKE_TOKEN_FILE", "LOG_LEVEL"} {
		require.Contains(t, reach, v, "the scan finds the intake's own variables")
	}
	var own []string
	for _, v := range reach {
		if !isWorkerVar(v) {
			own = append(own, v)
		}
	}
	require.ElementsMatch(t, own, starterVars, "starterVars are the variables the intake's own code reads beyond the worker's")

	var vars, unread []string
	for _, v := range readsVars(t, "starter") {
		if slices.Contains(all, v) && !slices.Contains(reach, v) && !isWorkerVar(v) {
			unread = append(unread, v)
		} else {
			vars = append(vars, v)
		}
	}
	for _, v := range []string{"TEMPORAL_TASK_QUEUE", "OTEL_SDK_DISABLED", "SLACK_WEBHOOK_URL"} {
		require.Contains(t, vars, v, "the scan finds the starter's variables")
	}
	for _, v := range []string{"CODEC_SERVER_TOKEN", "CODEC_SERVER_LISTEN", "INTAKE_TOPIC"} {
		require.Contains(t, unread, v, "the intake does not read it")
	}
	settingsCover(t, vars, intakeSettings)

	// One the intake does not read leaves a recorded intake fit.
	s, _ := testStack(t)
	s.buildEnv([]string{"PATH=/bin"})
	before := intakeSettings(s)
	for _, v := range unread {
		s.buildEnv([]string{"PATH=/bin", v + "=n3w-v4lue"})
		d, why := decide(ReuseRecorded, observed{recorded: true, settings: before, binary: "x"}, intakeSettings(s), "x")
		require.Equal(t, reuse, d, "%s: %s", v, why)
	}
}

// intakeOwnVars lists the variables the starter package's own code reads
// within `starter intake` (reach) and anywhere (all): the NAME_LIKE strings
// of the functions the root command's and the intake command's
// constructors reach by name, not following AddCommand (another command's
// code), and of every function.
func intakeOwnVars(t *testing.T) (reach, all []string) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("../../starter/*.go")
	require.NoError(t, err)
	refs := map[string][]string{} // function name: the names it refers to
	lits := map[string][]string{} // function name: its NAME_LIKE strings
	allSet := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			var visit func(n ast.Node) bool
			visit = func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "AddCommand" {
						ast.Inspect(n.Fun, visit)
						for _, arg := range n.Args { // still its strings for all
							ast.Inspect(arg, func(m ast.Node) bool {
								if l, ok := m.(*ast.BasicLit); ok {
									if v, err := strconv.Unquote(l.Value); l.Kind == token.STRING && err == nil && envName.MatchString(v) {
										allSet[v] = true
									}
								}
								return true
							})
						}
						return false
					}
				case *ast.Ident:
					refs[name] = append(refs[name], n.Name)
				case *ast.BasicLit:
					if v, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && envName.MatchString(v) {
						lits[name] = append(lits[name], v)
						allSet[v] = true
					}
				}
				return true
			}
			ast.Inspect(fd.Body, visit)
		}
	}
	seen := map[string]bool{}
	reachSet := map[string]bool{}
	var walk func(string)
	walk = func(fn string) {
		if seen[fn] {
			return
		}
		seen[fn] = true
		for _, v := range lits[fn] {
			reachSet[v] = true
		}
		for _, r := range refs[fn] {
			if _, ok := refs[r]; ok || lits[r] != nil {
				walk(r)
			}
		}
	}
	for _, root := range []string{"main", "newRoot", "newRootApp", "intakeCommand"} {
		require.Contains(t, refs, root, "the starter has %s", root)
		walk(root)
	}
	for v := range reachSet {
		reach = append(reach, v)
	}
	for v := range allSet {
		all = append(all, v)
	}
	sort.Strings(reach)
	sort.Strings(all)
	return reach, all
}

// settingsCover checks that each of vars, set by the caller to a new value,
// makes a recorded instance with these settings unfit, and that secrets
// are recorded as hashes.
func settingsCover(t *testing.T, vars []string, settingsOf func(*Stack) string) {
	t.Helper()
	one, _ := testStack(t)
	one.ports = map[string]int{"TEMPORAL": 7233, "TEMPORAL_UI": 8233, "FIRESTORE": 8081, "BIGQUERY": 9050, "STANDIN": 8089, "PUBSUB": 8085, "SLACK": 8095}
	// Real credentials and the caller's own webhook: the stack then
	// passes GEMINI_API_KEY and SLACK_WEBHOOK_URL through.
	one.Gemini = gemini{Configured: true, Via: "GEMINI_API_KEY"}
	one.OwnSlack = true
	stack := func(environ ...string) *Stack {
		s := *one // the same stack, started from another environment
		s.buildEnv(append([]string{"PATH=/bin", "GEMINI_API_KEY=base-key", "SLACK_WEBHOOK_URL=https://hooks.example/base"}, environ...))
		return &s
	}
	base := stack()
	before := settingsOf(base)
	replaced := map[string]bool{"PAYLOAD_KEY_FILE": true}
	for _, kv := range base.exports() {
		k, _, _ := strings.Cut(kv, "=")
		replaced[k] = true
	}
	checked, secrets := 0, 0
	for _, v := range vars {
		if slices.Contains(droppedTemporal, v) || slices.Contains(droppedBigQuery, v) || replaced[v] {
			continue // the caller's value never reaches the worker
		}
		const value = "n3w-v4lue-0f-the-caller"
		after := settingsOf(stack(v + "=" + value))
		d, why := decide(ReuseRecorded, observed{recorded: true, settings: before, binary: "x"}, after, "x")
		require.Equal(t, restart, d, "%s: one started without it is reused", v)
		require.Contains(t, why, v, "the reason names what changed")
		require.NotRegexp(t, `#[0-9a-f]{12}`, why, "%s: the reason names it, without a hash", v)
		if secretName.MatchString(v) && !pathName.MatchString(v) {
			require.NotContains(t, after, value, "%s is recorded as a hash", v)
			plain := sha256.Sum256([]byte(v + "=" + value))
			require.NotContains(t, after, hex.EncodeToString(plain[:6]), "%s: its hash is keyed, not one anyone can recompute from a guess", v)
			secrets++
		}
		checked++
	}
	require.Greater(t, checked, 30)
	require.Greater(t, secrets, 5)

	after := settingsOf(stack("OTEL_EXPORTER_OTLP_HEADERS=api-key=hidden"))
	require.NotEqual(t, before, after, "the OpenTelemetry SDK's own variables count")
	require.NotContains(t, after, "hidden")
	require.NotContains(t, before, "base-key")
	require.NotContains(t, before, "hooks.example")
}

// TestWorkerSettingsFiles: a file the worker reads at start, changed under
// the same path, makes a recorded worker unfit.
func TestWorkerSettingsFiles(t *testing.T) {
	s, _ := testStack(t)
	mcp := filepath.Join(t.TempDir(), "mcp.yaml")
	require.NoError(t, os.WriteFile(mcp, []byte("servers: {}\n"), 0o644))
	s.buildEnv([]string{"MCP_CONFIG=" + mcp})
	before := workerSettings(s)
	require.NoError(t, os.WriteFile(mcp, []byte("servers: {response: {command: x}}\n"), 0o644))
	d, _ := decide(ReuseRecorded, observed{recorded: true, settings: before, binary: "x"}, workerSettings(s), "x")
	require.Equal(t, restart, d)
}

// TestIntakeSettingsFiles: an intake whose token file or payload key file
// changed under the same path is unfit, as is one of a stack whose stack
// settings (here the Pub/Sub emulator's port) changed.
func TestIntakeSettingsFiles(t *testing.T) {
	s, _ := testStack(t)
	keys := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keys, []byte("k1:AAAA\n"), 0o600))
	s.PayloadKeyFile = keys
	s.buildEnv(nil)
	_, err := s.intakeToken()
	require.NoError(t, err)
	before := intakeSettings(s)
	unfit := func(what string) {
		t.Helper()
		after := intakeSettings(s)
		d, _ := decide(ReuseRecorded, observed{recorded: true, settings: before, binary: "x"}, after, "x")
		require.Equal(t, restart, d, what)
		before = after
	}
	require.NoError(t, os.WriteFile(keys, []byte("k2:BBBB\n"), 0o600))
	unfit("a new payload key")
	require.NoError(t, os.WriteFile(s.intakeTokenPath(), []byte("another token\n"), 0o600))
	unfit("a new webhook token")
	require.NotContains(t, before, "another token")
	s.ports["PUBSUB"]++
	s.buildEnv(nil)
	unfit("another Pub/Sub emulator")
}

// TestEvalWorkerHasTheAnalystsMCPTools: the eval's worker had no MCP tools
// while the analyst's had the example response server, so the scorecard
// measured another tool set than the one that ships. It gets the same
// server, with a state directory of its own; a caller's MCP_CONFIG it
// inherits as the analyst's worker does.
func TestEvalWorkerHasTheAnalystsMCPTools(t *testing.T) {
	s, _ := testStack(t)
	require.NoError(t, os.MkdirAll(s.BinDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(s.BinDir, "worker"), []byte("#!/bin/sh\n"), 0o755))
	s.buildEnv(nil)
	var eval *Service
	for i := range table {
		if table[i].Name == "eval-worker" {
			eval = &table[i]
		}
	}
	require.NotNil(t, eval)
	l, err := eval.Launch(s, 0)
	require.NoError(t, err)
	cfg := filepath.Join(s.DataDir, "mcp-eval.yaml")
	require.Contains(t, l.Env, "MCP_CONFIG="+cfg)
	raw, err := os.ReadFile(cfg)
	require.NoError(t, err)
	require.Contains(t, string(raw), filepath.Join(s.BinDir, "response-server"))
	require.Contains(t, string(raw), filepath.Join(s.DataDir, "response-eval"), "not the analyst's state")

	mine := filepath.Join(t.TempDir(), "mcp.yaml")
	s.buildEnv([]string{"MCP_CONFIG=" + mine})
	l, err = eval.Launch(s, 0)
	require.NoError(t, err)
	require.False(t, slices.ContainsFunc(l.Env, func(kv string) bool { return strings.HasPrefix(kv, "MCP_CONFIG=") }), "the caller's, inherited")
}
