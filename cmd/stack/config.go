package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Stack is one stack's resolved settings: where its files are, its ports,
// the tools it runs and the environment its processes get.
type Stack struct {
	Root     string // the repository
	UserCwd  string // where the user ran the task (STACK_USER_CWD)
	DataDir  string // STACK_DATA_DIR, default .data
	BinDir   string // STACK_BIN_DIR, default bin
	Host     string
	ports    map[string]int // by Port.Var
	Temporal string         // the Temporal CLI
	BigQuery string         // the BigQuery emulator
	// The cluster's tools (setup.sh cluster) and PostgreSQL's binaries.
	TemporalServer, SQLTool, UIServer, PostgresBin string

	Namespace        string
	Project          string // GOOGLE_CLOUD_PROJECT
	BigQueryProject  string
	BigQueryDataset  string
	BigQueryData     string
	BigQueryTables   string
	BigQueryRunbooks string
	PayloadKeyFile   string // absolute, or empty
	Gemini           gemini
	// OwnSlack says the caller set SLACK_WEBHOOK_URL (a real webhook, a
	// secret): verdicts go there, and no local receiver starts.
	OwnSlack bool

	// StopOnExit: this invocation stops what it starts when it ends (only
	// what the log says about reuse depends on it).
	StopOnExit  bool
	StopTimeout time.Duration
	// LockTimeout bounds the wait for another invocation that starts or
	// stops services of this data directory (lock.go).
	LockTimeout time.Duration
	// SaveOnStop: the Firestore data is saved before the emulator stops
	// (off for clean).
	SaveOnStop bool

	env []string // of every process the stack starts, and of the starter
	log *logger
}

// gemini is how the model is reached: the user's configuration or the
// stand-in.
type gemini struct {
	Configured bool
	Via        string // which setting reaches it (a name, never a key)
	// OwnStandin: the caller's environment holds the stand-in settings a
	// sourced stack.env exported; they never reach a service as theirs.
	OwnStandin bool
}

// The BigQuery emulator's sample data: the project and dataset data.yaml
// defines.
const (
	bigQueryProject = "demo-investigator"
	bigQueryDataset = "security_logs"
	defaultProject  = "demo-investigator"
)

// The caller's settings the local stack does not pass on: Temporal Cloud's
// (this stack is the local dev server) and real BigQuery's (its
// sub-agent queries the emulator's sample logs; STACK_BIGQUERY_TABLES and
// STACK_BIGQUERY_RUNBOOKS choose other files).
var droppedTemporal = []string{
	"TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY", "TEMPORAL_TLS_CA",
	"TEMPORAL_TLS_CERT_DATA", "TEMPORAL_TLS_KEY_DATA", "TEMPORAL_TLS_CA_DATA", "TEMPORAL_TLS_SERVER_NAME",
	"TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_PROFILE",
}

var droppedBigQuery = []string{"BIGQUERY_EMULATOR_HOST", "BIGQUERY_TABLES_CONFIG", "BIGQUERY_RUNBOOKS_DIR"}

// getenv is os.Getenv, replaced in tests.
var getenv = defaultGetenv

var defaultGetenv = os.Getenv

// loadStack resolves the settings from the environment. table gives the
// ports to read.
func loadStack(table []Service, log *logger) (*Stack, error) {
	root, err := findRoot()
	if err != nil {
		return nil, err
	}
	cache := getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	cache = filepath.Join(cache, "investigator", "bin")
	s := &Stack{
		Root:             root,
		UserCwd:          orDefault(getenv("STACK_USER_CWD"), root),
		DataDir:          under(root, orDefault(getenv("STACK_DATA_DIR"), ".data")),
		BinDir:           under(root, orDefault(getenv("STACK_BIN_DIR"), "bin")),
		Host:             "127.0.0.1",
		ports:            map[string]int{},
		Temporal:         orDefault(getenv("TEMPORAL_CLI"), filepath.Join(cache, "temporal")),
		BigQuery:         orDefault(getenv("BIGQUERY_EMULATOR"), filepath.Join(cache, "bigquery-emulator")),
		TemporalServer:   filepath.Join(cache, "temporal-server"),
		SQLTool:          filepath.Join(cache, "temporal-sql-tool"),
		UIServer:         filepath.Join(cache, "temporal-ui-server"),
		PostgresBin:      orDefault(getenv("STACK_POSTGRES_BIN"), "/usr/lib/postgresql/15/bin"),
		Namespace:        "default",
		Project:          orDefault(getenv("GOOGLE_CLOUD_PROJECT"), defaultProject),
		BigQueryProject:  bigQueryProject,
		BigQueryDataset:  bigQueryDataset,
		BigQueryData:     under(root, orDefault(getenv("STACK_BIGQUERY_DATA"), "examples/bigquery/data.yaml")),
		BigQueryTables:   under(root, orDefault(getenv("STACK_BIGQUERY_TABLES"), "examples/bigquery/tables.yaml")),
		BigQueryRunbooks: under(root, orDefault(getenv("STACK_BIGQUERY_RUNBOOKS"), "examples/bigquery/runbooks")),
		StopOnExit:       true,
		SaveOnStop:       true,
		log:              log,
	}
	if s.StopTimeout, err = seconds("STACK_STOP_TIMEOUT", 20*time.Second); err != nil {
		return nil, err
	}
	if s.LockTimeout, err = seconds("STACK_LOCK_TIMEOUT", defaultLockTimeout); err != nil {
		return nil, err
	}
	for _, svc := range table {
		for _, p := range svc.Ports {
			v := "STACK_" + p.Var + "_PORT"
			s.ports[p.Var] = p.Default
			if raw := getenv(v); raw != "" {
				n, err := strconv.Atoi(raw)
				if err != nil || n <= 0 || n > 65535 {
					return nil, fmt.Errorf("%s=%q is not a port number", v, raw)
				}
				s.ports[p.Var] = n
			}
		}
	}
	s.Gemini = geminiSetting(s.Host)
	s.OwnSlack = getenv("SLACK_WEBHOOK_URL") != ""
	// STACK_BIGQUERY_TABLES=none: workers without the BigQuery sub-agent
	// (the cluster's kill test: the emulator fails under 50 investigations
	// at once).
	if getenv("STACK_BIGQUERY_TABLES") == "none" {
		s.BigQueryTables = ""
	}
	if k := getenv("PAYLOAD_KEY_FILE"); k != "" {
		s.PayloadKeyFile = s.userPath(k)
	}
	return s, nil
}

// findRoot is the repository: the nearest directory up from the working
// directory that holds go.mod and Taskfile.yml.
func findRoot() (string, error) {
	if r := getenv("STACK_ROOT"); r != "" {
		return filepath.Abs(r)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if isFile(filepath.Join(d, "go.mod")) && isFile(filepath.Join(d, "Taskfile.yml")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("run it inside the repository: no go.mod with a Taskfile.yml above %s", wd)
		}
	}
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// under makes a relative path absolute from root.
func under(root, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(root, p)
}

// userPath resolves a path the user typed: from where they ran the task
// when the file is there, otherwise from the working directory.
func (s *Stack) userPath(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	if _, err := os.Stat(filepath.Join(s.UserCwd, p)); err == nil {
		return filepath.Join(s.UserCwd, p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return abs
}

func seconds(name string, def time.Duration) (time.Duration, error) {
	raw := getenv(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.ParseFloat(raw, 64)
	// !(n > 0) also refuses NaN; past the limit (Inf too) the conversion
	// below would overflow into a negative duration.
	// float64(MaxInt64) is 2^63, one past the limit: a product equal to it
	// overflows too.
	if err != nil || !(n > 0) || n*float64(time.Second) >= float64(math.MaxInt64) {
		return 0, fmt.Errorf("%s=%q is not a number of seconds", name, raw)
	}
	return time.Duration(n * float64(time.Second)), nil
}

// standinKey is the API key stack.env exports with the stand-in's URL; no
// Gemini endpoint issues it, so it marks those settings as the stack's own.
const standinKey = "offline-standin"

// geminiSetting reads which of the user's settings reaches Gemini. The
// stand-in settings a sourced stack.env exports (standinKey with an
// http://HOST:PORT URL on the stack's host, any port: the stack that wrote
// it may have used another) are not the user's: taken for theirs, the next
// start left the stand-in off and the worker called a port nothing served.
func geminiSetting(host string) gemini {
	g := gemini{Via: "GEMINI_API_KEY"}
	key, base := getenv("GEMINI_API_KEY"), getenv("GOOGLE_GEMINI_BASE_URL")
	if key == standinKey && isStandinURL(base, host) {
		key, base, g.OwnStandin = "", "", true
	}
	if getenv("GOOGLE_API_KEY") != "" {
		g.Via, g.Configured = "GOOGLE_API_KEY", true
	}
	if key != "" {
		g.Via, g.Configured = "GEMINI_API_KEY", true
	}
	if base != "" {
		g.Via, g.Configured = "GOOGLE_GEMINI_BASE_URL="+base, true
	}
	if v := strings.ToLower(getenv("GOOGLE_GENAI_USE_VERTEXAI")); v == "1" || v == "true" {
		g.Via, g.Configured = "Vertex AI (GOOGLE_GENAI_USE_VERTEXAI)", true
	}
	return g
}

// isStandinURL: u is what exports writes for a stand-in on host.
func isStandinURL(u, host string) bool {
	rest, ok := strings.CutPrefix(u, "http://"+host+":")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(rest)
	return err == nil && n > 0 && n <= 65535 && strconv.Itoa(n) == rest
}

func (s *Stack) port(v string) int { return s.ports[v] }

func (s *Stack) addr(v string) string { return fmt.Sprintf("%s:%d", s.Host, s.ports[v]) }

func (s *Stack) LogDir() string  { return filepath.Join(s.DataDir, "logs") }
func (s *Stack) PidDir() string  { return filepath.Join(s.DataDir, "pids") }
func (s *Stack) SaveDir() string { return filepath.Join(s.DataDir, "firestore") }
func (s *Stack) EnvFile() string { return filepath.Join(s.DataDir, "stack.env") }

func (s *Stack) UIURL() string    { return fmt.Sprintf("http://localhost:%d", s.port("TEMPORAL_UI")) }
func (s *Stack) CodecURL() string { return "http://" + s.addr("CODEC") }

// usingStandin: no Gemini credentials, so the stand-in answers.
func (s *Stack) usingStandin() bool { return !s.Gemini.Configured }

func (s *Stack) standinURL() string { return "http://" + s.addr("STANDIN") }

// show is a path as the user should type it: relative to the repository
// when it is inside and the user works there, absolute otherwise.
func (s *Stack) show(p string) string {
	if rel, ok := strings.CutPrefix(p, s.Root+string(filepath.Separator)); ok && s.UserCwd == s.Root {
		return rel
	}
	return p
}

// The ports file: STACK_<VAR>_PORT=N lines, so that stop, save and status
// reach the running stack whatever their own environment says.
func (s *Stack) portsFile() string { return filepath.Join(s.PidDir(), "ports") }

func (s *Stack) portLines() string {
	vars := make([]string, 0, len(s.ports))
	for v := range s.ports {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	var b strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&b, "STACK_%s_PORT=%d\n", v, s.ports[v])
	}
	return b.String()
}

var portLine = regexp.MustCompile(`^STACK_([A-Z_]+)_PORT=([0-9]+)$`)

// loadPorts takes the recorded ports, when there are some.
func (s *Stack) loadPorts() error {
	f, err := os.Open(s.portsFile())
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := portLine.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			if _, known := s.ports[m[1]]; known {
				s.ports[m[1]], _ = strconv.Atoi(m[2])
			}
		}
	}
	return sc.Err()
}

// buildEnv is the environment of the stack's processes and the starter:
// the caller's, less Temporal Cloud and BigQuery settings (said once), with
// the stack's addresses.
func (s *Stack) buildEnv(environ []string) {
	set := s.exports()
	replaced := map[string]bool{"PAYLOAD_KEY_FILE": true} // made absolute, or dropped
	// The stand-in's settings a sourced stack.env left: set again below,
	// or gone with real credentials.
	if s.Gemini.OwnStandin {
		replaced["GEMINI_API_KEY"], replaced["GOOGLE_GEMINI_BASE_URL"] = true, true
	}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		replaced[k] = true
	}
	var env []string
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case slices.Contains(droppedTemporal, k):
			if v != "" {
				s.log.info("ignoring %s for the local stack", k) // a key: never its value
			}
		case slices.Contains(droppedBigQuery, k):
			if v != "" {
				s.log.info("ignoring %s=%s for the local stack", k, v)
			}
		case !replaced[k]:
			env = append(env, kv)
		}
	}
	s.env = append(env, set...)
}

// exports are the settings a second terminal needs for bin/starter (and
// what .data/stack.env holds). Never a real key.
func (s *Stack) exports() []string {
	e := []string{
		"TEMPORAL_ADDRESS=" + s.addr("TEMPORAL"),
		"TEMPORAL_NAMESPACE=" + s.Namespace,
		// The starter's Web UI links point at this stack's Web UI.
		"TEMPORAL_UI_URL=" + s.UIURL(),
		"FIRESTORE_EMULATOR_HOST=" + s.addr("FIRESTORE"),
		"GOOGLE_CLOUD_PROJECT=" + s.Project,
		"BIGQUERY_EMULATOR_HOST=" + s.addr("BIGQUERY"),
		"BIGQUERY_TABLES_CONFIG=" + s.BigQueryTables, // empty: no sub-agent
		"BIGQUERY_RUNBOOKS_DIR=" + s.BigQueryRunbooks,
	}
	if s.usingStandin() {
		e = append(e, "GOOGLE_GEMINI_BASE_URL="+s.standinURL(), "GEMINI_API_KEY="+standinKey)
	}
	if s.PayloadKeyFile != "" {
		e = append(e, "PAYLOAD_KEY_FILE="+s.PayloadKeyFile)
	}
	// The intake (intake.go): the worker publishes verdicts and the starter
	// publishes alerts through the emulator; verdicts reach the local Slack
	// receiver unless the caller has a webhook of their own.
	e = append(e, "PUBSUB_EMULATOR_HOST="+s.addr("PUBSUB"))
	if !s.OwnSlack {
		e = append(e, "SLACK_WEBHOOK_URL="+s.localSlackURL())
	}
	return e
}

// Getenv reads the stack's environment.
func (s *Stack) Getenv(k string) string {
	for i := len(s.env) - 1; i >= 0; i-- {
		if kk, v, ok := strings.Cut(s.env[i], "="); ok && kk == k {
			return v
		}
	}
	return ""
}

// writeEnvFile writes .data/stack.env.
func (s *Stack) writeEnvFile() error {
	var b strings.Builder
	b.WriteString("# Written by bin/stack: source it to use bin/starter with the local stack.\n")
	for _, kv := range s.exports() {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
	}
	if err := s.mkdirPrivate(s.DataDir); err != nil {
		return err
	}
	return writeFileAtomic(s.EnvFile(), []byte(b.String()))
}

func writeFileAtomic(path string, data []byte) error {
	return writeFileAtomicMode(path, data, 0o600)
}

func writeFileAtomicMode(path string, data []byte, mode os.FileMode) error {
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	_ = os.Remove(tmp) // WriteFile keeps the mode of a file left behind
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
