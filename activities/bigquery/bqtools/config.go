// Package bqtools is the BigQuery sub-agent's view of BigQuery: which tables it
// may look at (Config), the SQL runbooks it may offer (Runbook), a guard that
// lets only a single SELECT through (CheckSQL), and the tools built on them
// (Tools).
package bqtools

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/secops-agent/investigator/internal/smallfile"
	"github.com/secops-agent/investigator/internal/yamltext"
)

// Defaults for a Config's limits.
const (
	DefaultMaxScanBytes  int64 = 1 << 30 // 1 GiB
	DefaultMaxResultRows       = 10000
	DefaultJobTimeout          = 60 * time.Second
	// CallAttempt bounds one attempt of a BigQuery tool call: the
	// sub-agent runs its calls as activities with this start-to-close
	// timeout (workflows.bigQueryToolAttempt).
	CallAttempt = 5 * time.Minute
	// MaxJobTimeout is the longest job_timeout: a job must end within its
	// attempt with a minute left for the dry run and reading its rows, or
	// every attempt cancels its job and the retry runs the query again.
	MaxJobTimeout = CallAttempt - time.Minute
)

// Config is the sub-agent's view of BigQuery, loaded from YAML:
//
//	project: demo-investigator          # optional: the client's project if empty
//	max_scan_bytes: 1073741824          # refuse queries whose dry run estimates more (default 1 GiB)
//	max_result_rows: 10000              # rows kept for paging (default 10000)
//	job_timeout: 60s                    # BigQuery ends a query job that runs longer (default 60s, at most 4m)
//	allowed_table_functions: []         # table functions queries may use (default none)
//	tables:
//	  - table: security_logs.auth_events
//	    description: SSH and sudo authentication events from Linux hosts ...
type Config struct {
	// Project holds the configured tables; empty means the client's project.
	Project string `yaml:"project"`
	// MaxScanBytes is the most a query may scan: queries whose dry run
	// estimates more are refused, and jobs run with it as MaxBytesBilled.
	MaxScanBytes int64 `yaml:"max_scan_bytes"`
	// MaxResultRows is how many rows of a result bigquery_result pages through.
	MaxResultRows int `yaml:"max_result_rows"`
	// JobTimeout ends a query job that runs longer (BigQuery's job
	// timeout), so that a query that scans little but computes much, such as
	// a large cross join, cannot run on.
	JobTimeout time.Duration `yaml:"job_timeout"`
	// AllowedTableFunctions lists the table-valued functions queries may
	// use: "dataset.function" in Project, or a built-in's name (APPENDS,
	// CHANGES, GAP_FILL). None by default.
	AllowedTableFunctions []string `yaml:"allowed_table_functions"`
	Tables                []Table  `yaml:"tables"`
}

// Table is one table the sub-agent may use.
type Table struct {
	// ID is "dataset.table".
	ID          string `yaml:"table"`
	Description string `yaml:"description"`
}

var (
	datasetIDPattern = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	// Table names may hold Unicode letters, marks, numbers, connectors,
	// dashes and spaces; refuse only what would break a dotted reference.
	tableIDPattern = regexp.MustCompile("^[^.`\\s][^.`]*$")
	// A routine's name is letters, digits and underscores.
	functionNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)
)

// LoadConfig reads and checks a Config from a YAML file and fills in the
// default limits. Unknown keys are errors, so that a misspelt limit is not
// silently ignored.
func LoadConfig(path string) (Config, error) {
	data, err := smallfile.Read(path, smallfile.DefaultMax)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Config{}, fmt.Errorf("the BigQuery config file %s does not exist", path)
		}
		return Config{}, fmt.Errorf("cannot read the BigQuery config %s: %w", path, err)
	}
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("the BigQuery config %s is not valid YAML for this format: %s", path, yamltext.Error(err))
	}
	if err := cfg.check(); err != nil {
		return Config{}, fmt.Errorf("the BigQuery config %s: %w", path, err)
	}
	return cfg.withDefaults(), nil
}

func (c Config) check() error {
	if c.MaxScanBytes < 0 {
		return fmt.Errorf("max_scan_bytes must not be negative, got %d", c.MaxScanBytes)
	}
	if c.MaxResultRows < 0 {
		return fmt.Errorf("max_result_rows must not be negative, got %d", c.MaxResultRows)
	}
	if c.JobTimeout < 0 || (c.JobTimeout > 0 && c.JobTimeout < time.Millisecond) {
		return fmt.Errorf("job_timeout must be a positive duration such as 60s, got %s", c.JobTimeout)
	}
	if c.JobTimeout > MaxJobTimeout {
		return fmt.Errorf("job_timeout must be at most %s, so that a query job ends within the %s each BigQuery tool call may take; got %s", MaxJobTimeout, CallAttempt, c.JobTimeout)
	}
	seenFn := map[string]bool{}
	for i, f := range c.AllowedTableFunctions {
		if !functionNamePattern.MatchString(f) {
			return fmt.Errorf("allowed_table_functions[%d]: %q is neither dataset.function nor a built-in table function's name", i, f)
		}
		if err := checkSQL("SELECT * FROM "+f+"()", sqlPolicy{tableFunctions: []string{f}, bareDataset: true}); err != nil {
			return fmt.Errorf("allowed_table_functions[%d]: %s cannot be allowed: %v", i, f, err)
		}
		if seenFn[f] {
			return fmt.Errorf("allowed_table_functions[%d]: %s is listed twice", i, f)
		}
		seenFn[f] = true
	}
	if len(c.Tables) == 0 {
		return errors.New("no tables are configured; list at least one under tables: with table: dataset.table and a description")
	}
	seen := map[string]bool{}
	for i, t := range c.Tables {
		ds, tb, ok := strings.Cut(t.ID, ".")
		if !ok || len(ds) > 1024 || len(tb) > 1024 || !datasetIDPattern.MatchString(ds) || !tableIDPattern.MatchString(tb) {
			return fmt.Errorf("tables[%d]: table %q is not of the form dataset.table", i, t.ID)
		}
		if seen[t.ID] {
			return fmt.Errorf("tables[%d]: table %s is listed twice", i, t.ID)
		}
		seen[t.ID] = true
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxScanBytes == 0 {
		c.MaxScanBytes = DefaultMaxScanBytes
	}
	if c.MaxResultRows == 0 {
		c.MaxResultRows = DefaultMaxResultRows
	}
	if c.JobTimeout == 0 {
		c.JobTimeout = DefaultJobTimeout
	}
	return c
}

// Runbook is a SQL file the sub-agent may offer to the model. Its header
// comments give its title and description:
//
//	-- title: Failed SSH logins by source IP
//	-- description: Counts failed SSH logins per source IP over the last day.
//	--   Parameters: none.
//	SELECT ...
//
// Any other header comment line continues the previous title or description
// until a blank line; other comments are ignored.
type Runbook struct {
	Name        string `json:"name"` // the file's base name without .sql
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	SQL         string `json:"sql"` // the file without its header comments
}

var headerKey = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)$`)

// LoadRunbooks reads the *.sql files of dir, sorted by name. A missing dir
// means no runbooks. A file without a title, without SQL, or whose SQL is not
// a single SELECT is an error naming the file.
func LoadRunbooks(dir string) ([]Runbook, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the runbook directory: %w", err)
	}
	var out []Runbook
	for _, e := range entries {
		if e.IsDir() || !strings.EqualFold(filepath.Ext(e.Name()), ".sql") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := smallfile.Read(path, smallfile.DefaultMax)
		if err != nil {
			return nil, fmt.Errorf("cannot read runbook %s: %w", path, err)
		}
		rb, err := parseRunbook(strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())), string(data))
		if err != nil {
			return nil, fmt.Errorf("runbook %s: %w", path, err)
		}
		out = append(out, rb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func parseRunbook(name, text string) (Runbook, error) {
	rb := Runbook{Name: name}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	var key string
	i := 0
	for ; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" {
			key = ""
			continue
		}
		if !strings.HasPrefix(line, "--") {
			break
		}
		body := strings.TrimSpace(strings.TrimPrefix(line, "--"))
		if body == "" {
			key = ""
			continue
		}
		if m := headerKey.FindStringSubmatch(body); m != nil && isRunbookKey(m[1]) {
			key = strings.ToLower(m[1])
			body = m[2]
		} else if key == "" {
			continue // a plain comment line
		}
		switch key {
		case "title":
			rb.Title = joinText(rb.Title, body)
		case "description":
			rb.Description = joinText(rb.Description, body)
		}
	}
	rb.SQL = strings.TrimSpace(strings.Join(lines[i:], "\n"))
	if rb.Title == "" {
		return Runbook{}, errors.New("no title: start the file with a comment line such as \"-- title: Failed SSH logins by source IP\"")
	}
	if rb.SQL == "" {
		return Runbook{}, errors.New("no SQL after the header comments")
	}
	if err := CheckSQL(rb.SQL); err != nil {
		return Runbook{}, fmt.Errorf("its SQL is refused: %w", err)
	}
	return rb, nil
}

func isRunbookKey(k string) bool {
	k = strings.ToLower(k)
	return k == "title" || k == "description"
}

func joinText(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + " " + b
}
