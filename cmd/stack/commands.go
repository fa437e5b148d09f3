package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
)

// loader resolves the stack's settings: from the environment, or with the
// ports the running stack recorded (stop, status, save, clean).
type loader func(recorded bool) (*Stack, error)

const (
	defaultAlert = "examples/alerts/guardduty-ssh-bruteforce.json"
	historyDir   = "examples/alerts/history"
)

// approvalTimeout is how long the demo's actions wait for approval:
// INVESTIGATE_APPROVAL_TIMEOUT, else 5 minutes for a person at a terminal,
// or 5 seconds when nobody can answer (the run tears the stack down, or its
// output is not a terminal: a script or CI).
func approvalTimeout(teardown, attended bool) string {
	if v := getenv("INVESTIGATE_APPROVAL_TIMEOUT"); v != "" {
		return v
	}
	if teardown || !attended {
		return "5s"
	}
	return "5m"
}

// parseTeardown reads INVESTIGATE_TEARDOWN.
func parseTeardown(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes":
		return true, nil
	case "", "0", "false", "no":
		return false, nil
	}
	return false, fmt.Errorf("INVESTIGATE_TEARDOWN must be 1 (stop the stack at the end) or 0 (leave it running), not '%s'", v)
}

// investigate is `go tool task investigate`: it starts the stack (reusing
// what runs), imports the example past alerts and investigates $ALERT with
// the starter, whose exit status it returns. The stack stays up afterwards,
// like `docker compose up -d`, so that the Web UI link and the follow-up
// commands it prints work; with INVESTIGATE_TEARDOWN=1 it stops, at the
// end, what this run started.
func investigate(load loader, tbl []Service, log *logger, args []string, stdout, stderr io.Writer) int {
	teardown, err := parseTeardown(getenv("INVESTIGATE_TEARDOWN"))
	if err != nil {
		fmt.Fprintf(stderr, "investigate: %v\n", err)
		return 2
	}
	s, err := load(false)
	if err != nil {
		log.error("%v", err)
		return 1
	}
	s.StopOnExit = teardown
	alert := orDefault(getenv("ALERT"), defaultAlert)
	// Task runs this from the repository; a relative ALERT given from
	// another directory is looked up there first.
	if u := getenv("INVESTIGATE_USER_CWD"); !filepath.IsAbs(alert) && u != "" && u != s.Root && isFile(filepath.Join(u, alert)) {
		alert = filepath.Join(u, alert)
	}
	if !isFile(under(s.Root, alert)) {
		fmt.Fprintf(stderr, "investigate: alert file not found: %s\n", alert)
		return 2
	}
	starter := filepath.Join(s.BinDir, "starter")
	if !isExecutable(starter) {
		fmt.Fprintf(stderr, "investigate: %s not found: run 'go tool task build'\n", starter)
		return 1
	}
	sg := catchSignals()
	sv := newSupervisor(s, tbl, activeProfile(s))
	if err := sv.up(sg.ctx); err != nil {
		reportUpError(log, err)
		stopStarted(sv, stdout, log)
		return orCode(sg.code(), 1)
	}
	out := filepath.Join(s.LogDir(), "investigate.out")
	rc := func() int {
		history, _ := filepath.Glob(filepath.Join(s.Root, historyDir, "*.json"))
		if len(history) == 0 {
			fmt.Fprintf(stdout, "investigate: no past alerts in %s/*.json; skipping the import\n", historyDir)
		} else {
			fmt.Fprintf(stdout, "investigate: importing %d past alert(s) from %s\n", len(history), historyDir)
			argv := []string{starter, "alert", "import"}
			for _, h := range history {
				argv = append(argv, filepath.Join(historyDir, filepath.Base(h)))
			}
			if rc := runChild(sg, argv, s.env, s.Root, stdout, stderr); rc != 0 || sg.code() != 0 {
				return rc
			}
		}
		fmt.Fprintf(stdout, "investigate: investigating %s (Web UI: %s)\n", alert, s.UIURL())
		f, err := createPrivate(out)
		if err != nil {
			log.error("%v", err)
			return 1
		}
		defer f.Close()
		// The output is kept to find the workflow ID for the closing lines.
		argv := []string{starter, "investigate", "--alert", alert}
		if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--approval-timeout") }) {
			// The example response server's block_ip waits for the analyst
			// (design/tools.md); a bounded wait keeps the demo from waiting
			// a day for someone who is not there.
			wait := approvalTimeout(teardown, term.IsTerminal(int(os.Stdout.Fd())))
			fmt.Fprintf(stdout, "investigate: an action the plan asks for waits up to %s for 'bin/starter approve-call ID CALL_ID' (or deny-call) in another terminal (INVESTIGATE_APPROVAL_TIMEOUT)\n", wait)
			argv = append(argv, "--approval-timeout", wait)
		}
		rc := runChild(sg, append(argv, args...), s.env, s.Root, io.MultiWriter(stdout, f), stderr)
		if rc != 0 {
			fmt.Fprintf(stderr, "investigate: the starter exited with code %d (logs: %s/)\n", rc, s.show(s.LogDir()))
		}
		return rc
	}()
	if teardown {
		if !stopStarted(sv, stdout, log) && rc == 0 {
			rc = 1
		}
	} else {
		// Saved now too, so that a machine crash before `stop` loses
		// nothing of this run; under the lock, as a stop's save is.
		if _, ok := s.recordedPid("firestore", firestoreMatch()); ok {
			if unlock, err := sv.lock(context.Background()); err != nil {
				log.warn("the Firestore data was not saved now: %v", err)
			} else {
				_ = s.saveFirestore(true)
				unlock()
			}
		}
		closingLines(s, out, stdout)
	}
	return orCode(sg.code(), rc)
}

func orCode(first, second int) int {
	if first != 0 {
		return first
	}
	return second
}

func reportUpError(log *logger, err error) {
	if !errors.Is(err, errFailed) && !errors.Is(err, context.Canceled) {
		log.error("%v", err)
	}
}

// stopStarted stops what this invocation started, saying so; false when
// something was left running (cleanup).
func stopStarted(sv *supervisor, stdout io.Writer, log *logger) bool {
	sv.mu.Lock()
	n := len(sv.started)
	sv.mu.Unlock()
	if n > 0 {
		fmt.Fprintln(stdout)
		log.info("stopping the services this run started...")
	}
	return sv.cleanup()
}

// closingLines says where to look now that the stack stays up.
func closingLines(s *Stack, out string, w io.Writer) {
	id, ui := "", ""
	if f, err := os.Open(out); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "Workflow ID:"); ok && id == "" {
				id = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "Web UI:"); ok && ui == "" {
				ui = strings.TrimSpace(v)
			}
		}
		f.Close()
	}
	starter := shellQuote(s.show(filepath.Join(s.BinDir, "starter")))
	showID := "ID"
	if id != "" {
		showID = shellQuote(id)
	}
	fmt.Fprintf(w, `
The local stack is still running. Look around:
  Web UI     %s
  Settings   . %s   (in your shell, before %s)
  Follow     %s watch %s   (Ctrl-C stops watching, not the investigation)
  Ask        %s ask %s "What should we check next?"
  Run tree   %s tree %s
  Stop       go tool task stop   (alerts, transcripts and memories stay in %s/; go tool task clean wipes them)
`, orDefault(ui, s.UIURL()), shellQuote(s.show(s.EnvFile())), starter,
		starter, showID, starter, showID, starter, showID, s.show(s.DataDir))
}

// dev is `go tool task dev`: the stack in the foreground until Ctrl-C or
// `stop` (SIGTERM), which stop what this session started; services that
// were already running are reused and left running. It ends, with status
// 1, when a service it started dies.
func dev(load loader, tbl []Service, log *logger, stdout io.Writer) int {
	s, err := load(false)
	if err != nil {
		log.error("%v", err)
		return 1
	}
	sg := catchSignals()
	sv := newSupervisor(s, tbl, Dev)
	// Under the lock: two sessions starting at once both saw none running.
	unlock, err := sv.lock(sg.ctx)
	if err != nil {
		reportUpError(log, err)
		return orCode(sg.code(), 1)
	}
	if pid, ok := s.runningDev(); ok {
		unlock()
		log.error("a 'go tool task dev' session is already running (pid %d); stop it with 'go tool task stop'", pid)
		return 1
	}
	// Recorded before the stack starts, so that `stop` finds the session
	// while it starts.
	start, _ := procStart(os.Getpid())
	err = s.recordPid(devSession, os.Getpid(), start)
	unlock()
	if err != nil {
		log.error("%v", err)
		return 1
	}
	// Ctrl-C and `stop` (SIGTERM) are the normal ways to end a session.
	signalled := func() int {
		if sg.code() == 128+int(syscall.SIGHUP) {
			return sg.code()
		}
		return 0
	}
	code := func() int {
		if err := sv.up(sg.ctx); err != nil {
			reportUpError(log, err)
			if sg.ctx.Err() != nil {
				return signalled()
			}
			return 1
		}
		devBanner(s, stdout)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-sg.ctx.Done():
				return signalled()
			case <-tick.C:
			}
			sv.mu.Lock()
			started := append([]*instance{}, sv.started...)
			sv.mu.Unlock()
			for _, in := range started {
				if _, ok := s.recordedPid(in.name, in.svc.Match); !ok {
					log.error("%s stopped unexpectedly", in.name)
					log.tail(s.logFile(in.name), 20)
					return 1
				}
			}
		}
	}()
	fmt.Fprintln(stdout)
	log.info("shutting down...")
	if !sv.cleanup() && code == 0 {
		code = 1
	}
	if pid, _ := os.ReadFile(s.pidFile(devSession)); strings.TrimSpace(string(pid)) == strconv.Itoa(os.Getpid()) {
		s.forget(devSession)
	}
	return code
}

func devBanner(s *Stack, w io.Writer) {
	payloads := "in clear (set PAYLOAD_KEY_FILE to encrypt them)"
	if s.PayloadKeyFile != "" {
		payloads = fmt.Sprintf("encrypted with %s; the Web UI decrypts them through the codec server %s", s.PayloadKeyFile, s.CodecURL())
	}
	bin := s.show(s.BinDir)
	fmt.Fprintf(w, `
  Local stack is running.
    Temporal Web UI:    %s
    Temporal gRPC:      %s (namespace %s)
    Firestore emulator: %s (project %s)
    BigQuery emulator:  http://%s (dataset %s.%s, sample logs from %s)
    Payloads:           %s
    Logs:               %s/
    State:              %s/temporal.db, Firestore data saved in %s on stop

  In another terminal, either let the task reuse this stack:
    go tool task investigate
    go tool task investigate ALERT=path/to/alert.json -- --lang ja
  or run the starter yourself:
    . %s
    %s/starter alert import %s/*.json
    %s/starter investigate --alert %s

  Press Ctrl-C to stop what this session started (or run 'go tool task stop',
  which also stops services that were already running).

`, s.UIURL(), s.addr("TEMPORAL"), s.Namespace, s.addr("FIRESTORE"), s.Project,
		s.addr("BIGQUERY"), s.BigQueryProject, s.BigQueryDataset, s.show(s.BigQueryData),
		payloads, s.show(s.LogDir()), s.show(s.DataDir), s.show(s.SaveDir()),
		shellQuote(s.show(s.EnvFile())), bin, historyDir, bin, defaultAlert)
}

// runWith is `stack run [--profile P] -- COMMAND...` (`go tool task
// eval`): profile p's stack around one command, which gets the stack's
// settings and STACK_RUN=1.
// What this run started is stopped at the end; the status is the
// command's.
func runWith(load loader, tbl []Service, p Profile, log *logger, argv []string, stdout, stderr io.Writer) int {
	s, err := load(false)
	if err != nil {
		log.error("%v", err)
		return 1
	}
	sg := catchSignals()
	sv := newSupervisor(s, tbl, p)
	rc := 1
	if err := sv.up(sg.ctx); err != nil {
		reportUpError(log, err)
	} else {
		rc = runChild(sg, argv, append(append([]string{}, s.env...), "STACK_RUN=1"), s.Root, stdout, stderr)
	}
	if !stopStarted(sv, stdout, log) && rc == 0 {
		rc = 1
	}
	return orCode(sg.code(), rc)
}

// status prints which services run, what answers on the stack's ports and
// when the Firestore data was last saved.
func status(s *Stack, tbl []Service, p Profile, w io.Writer) {
	sv := newSupervisor(s, tbl, p)
	if pid, ok := s.runningDev(); ok {
		fmt.Fprintf(w, "%-18s running (pid %d)\n", devSession, pid)
	} else {
		fmt.Fprintf(w, "%-18s not running\n", devSession)
	}
	recorded := map[string]bool{}
	for _, in := range sv.recorded() {
		recorded[in.name] = true
		if pid, ok := s.recordedPid(in.name, in.svc.Match); ok {
			fmt.Fprintf(w, "%-18s running (pid %d)\n", in.name, pid)
			continue
		}
		fmt.Fprintf(w, "%-18s not running (recorded in %s)\n", in.name, s.show(s.PidDir()))
	}
	for _, svc := range tbl {
		if svc.in(p) && !svc.Job && !recorded[svc.Name] && svc.Count[p] <= 1 {
			fmt.Fprintf(w, "%-18s not running (nothing recorded in %s)\n", svc.Name, s.show(s.PidDir()))
		}
	}
	ctx := context.Background()
	for _, svc := range tbl {
		// Instances of a Count (the cluster's intakes) are listed above.
		if !svc.in(p) || len(svc.Ports) == 0 || svc.Ready == nil || svc.Count[p] > 1 {
			continue
		}
		p := s.port(svc.Ports[0].Var)
		if svc.Ready.Check(ctx, s, svc.Name) == nil {
			fmt.Fprintf(w, "port %d: %s answers\n", p, svc.Title)
		} else {
			fmt.Fprintf(w, "port %d: no %s\n", p, svc.Title)
		}
	}
	if save, _, ok := s.latestSave(); ok {
		when := "time unknown"
		if st, err := os.Stat(save); err == nil {
			when = st.ModTime().Format("2006-01-02 15:04:05")
		}
		fmt.Fprintf(w, "Firestore data: last saved in %s (%s)\n", s.show(save), when)
	} else {
		fmt.Fprintln(w, "Firestore data: nothing saved yet")
	}
}

// clean stops everything without saving, then removes the local state:
// Temporal's database, the Firestore saves, logs, pids and stack.env. Only
// the stack's own entries are removed, then the directory if it is empty.
func clean(s *Stack, tbl []Service) error {
	s.SaveOnStop = false
	sv := newSupervisor(s, tbl, Dev)
	stoppedDev := sv.stopDev()
	if _, err := os.Stat(s.DataDir); err != nil {
		return nil
	}
	// Held until the state is gone: a start waiting for it finds none.
	unlock, err := sv.lock(context.Background())
	if err != nil {
		return err
	}
	defer unlock()
	sv.stopRecordedLocked(stoppedDev)
	dbs, _ := filepath.Glob(filepath.Join(s.DataDir, "temporal.db*"))
	for _, p := range append(dbs, s.SaveDir(), s.LogDir(), s.PidDir(), s.EnvFile(), s.postgresDir()) {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	if os.Remove(s.DataDir) != nil {
		s.log.info("kept %s: it holds files the stack did not write", s.show(s.DataDir))
	}
	s.log.info("removed the local state (Temporal history, Firestore data, logs)")
	return nil
}
