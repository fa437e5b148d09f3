// Command stack supervises the local stack from one table of services
// (table.go): the Temporal dev server with its Web UI, the Firestore and
// BigQuery emulators, the Gemini stand-in (without Gemini credentials),
// the codec server (with PAYLOAD_KEY_FILE) and the worker. Each service
// runs in its own process group with its log in .data/logs and its pid in
// .data/pids, so that stop and status work from any invocation, and
// services already running are reused.
//
//	stack investigate [starter flags]   the main job (go tool task investigate)
//	stack dev                           the stack in the foreground until Ctrl-C
//	stack run -- COMMAND...             the stack around one command (eval)
//	stack stop | status | save | clean
//
// Settings come from the environment: STACK_DATA_DIR, STACK_BIN_DIR,
// STACK_<SERVICE>_PORT, STACK_<SERVICE>_TIMEOUT, STACK_STOP_TIMEOUT, STACK_LOCK_TIMEOUT,
// TEMPORAL_CLI, BIGQUERY_EMULATOR, PAYLOAD_KEY_FILE and the model's
// credentials (README, "Settings"). It never reads stdin.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// exitCode carries a command's exit status through cobra.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit %d", int(c)) }

// exit turns a command's status into cobra's error.
func exit(code int) error {
	if code == 0 {
		return nil
	}
	return exitCode(code)
}

func run(args []string, stdout, stderr io.Writer) int {
	log := newLogger(stdout, stderr)
	root := &cobra.Command{
		Use:           "stack",
		Short:         "Start, reuse, stop and inspect the local stack",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Each command loads the stack's settings itself: stop and status read
	// the ports the running stack recorded, the others the environment.
	load := func(recorded bool) (*Stack, error) {
		s, err := loadStack(table, log)
		if err != nil {
			return nil, err
		}
		if recorded {
			return s, s.loadPorts()
		}
		s.buildEnv(os.Environ())
		return s, nil
	}
	// The commands on a running stack: its settings come with the ports
	// it recorded, whatever this environment says.
	onRecorded := func(use, short string, fn func(*Stack) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error {
				s, err := load(true)
				if err != nil {
					return err
				}
				return fn(s)
			}}
	}
	root.AddCommand(
		&cobra.Command{
			Use:   "investigate [starter flags]",
			Short: "Start the stack (or reuse it), import the example past alerts and investigate $ALERT; the stack stays up unless INVESTIGATE_TEARDOWN=1",
			Args:  cobra.ArbitraryArgs,
			// Flags after the command go to the starter.
			DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error {
				return exit(investigate(load, table, log, args, stdout, stderr))
			},
		},
		&cobra.Command{
			Use:   "dev",
			Short: "Run the stack in the foreground until Ctrl-C (or 'stack stop'); stops what it started",
			Args:  cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error {
				return exit(dev(load, table, log, stdout))
			},
		},
		&cobra.Command{
			Use:   "cluster",
			Short: "Start the production-shaped local cluster (PostgreSQL, Temporal's four services, Web UI, two workers, two intakes, the emulators), or reuse what runs of it; it stays up",
			Args:  cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error {
				return exit(cluster(load, table, log, stdout))
			},
		},
		upCommand(load, log),
		&cobra.Command{
			Use:    "cluster-schema",
			Short:  "Create or upgrade the cluster's Temporal databases (the temporal-schema job)",
			Args:   cobra.NoArgs,
			Hidden: true,
			RunE: func(*cobra.Command, []string) error {
				s, err := load(false)
				if err != nil {
					return err
				}
				return clusterSchema(s, stdout, stderr)
			},
		},
		runCommand(load, log, stdout, stderr),
		stopCommand(load, "stop", "Stop a dev session and every service recorded under .data/pids, saving the Firestore data first", Dev),
		// The same stop: the cluster's services are recorded like the dev
		// stack's (one stack at a time per data directory).
		stopCommand(load, "cluster-stop", "Stop the cluster (or any stack recorded under .data/pids); its PostgreSQL data stays in .data/postgres", Cluster),
		onRecorded("status", "Show which services run and when the Firestore data was last saved",
			func(s *Stack) error {
				status(s, table, activeProfile(s), stdout)
				return nil
			}),
		onRecorded("save", "Save the Firestore emulator's data under .data/firestore now",
			func(s *Stack) error {
				if _, ok := s.recordedPid("firestore", firestoreMatch()); !ok {
					log.error("no Firestore emulator started by the stack is running (see 'go tool task status')")
					return exitCode(1)
				}
				unlock, err := newSupervisor(s, table, Dev).lock(context.Background())
				if err != nil {
					return err
				}
				defer unlock()
				if s.saveFirestore(false) != nil {
					return exitCode(1)
				}
				return nil
			}),
		onRecorded("clean", "Stop everything without saving, then remove the local state (Temporal history, Firestore saves, logs, pids, stack.env)",
			func(s *Stack) error { return clean(s, table) }),
	)
	root.SetArgs(args)
	err := root.Execute()
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	default:
		log.error("%v", err)
		return 1
	}
}

func runCommand(load loader, log *logger, stdout, stderr io.Writer) *cobra.Command {
	profile := string(Dev)
	cmd := &cobra.Command{
		Use:   "run [--profile NAME] -- COMMAND [ARG...]",
		Short: "Start the stack (or reuse it), run COMMAND with its settings, then stop what was started",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if !known(table, Profile(profile)) {
				return fmt.Errorf("no profile %q in the service table", profile)
			}
			return exit(runWith(load, table, Profile(profile), log, args, stdout, stderr))
		},
	}
	cmd.Flags().StringVar(&profile, "profile", profile, "the services to run: dev, or eval (the dev stack with the eval's own worker instead of the analyst's)")
	return cmd
}

// known reports whether an entry of tbl runs in p.
func known(tbl []Service, p Profile) bool {
	for i := range tbl {
		if tbl[i].in(p) {
			return true
		}
	}
	return false
}

func firestoreMatch() string {
	for _, svc := range table {
		if svc.Name == "firestore" {
			return svc.Match
		}
	}
	return ""
}

// signals is a context that ends at the first SIGINT, SIGTERM or SIGHUP.
type signals struct {
	ctx   context.Context
	mu    sync.Mutex
	first os.Signal
	child *os.Process // the command in the foreground, if any
}

func catchSignals() *signals {
	ctx, cancel := context.WithCancel(context.Background())
	sg := &signals{ctx: ctx}
	got := make(chan os.Signal, 4)
	signal.Notify(got, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for sig := range got {
			sg.mu.Lock()
			if sg.first == nil {
				sg.first = sig
			}
			// Ctrl-C reaches a foreground child from the terminal; a TERM
			// or HUP sent to this process alone is passed on.
			if sg.child != nil && sig != syscall.SIGINT {
				_ = sg.child.Signal(sig)
			}
			sg.mu.Unlock()
			cancel()
		}
	}()
	return sg
}

// code is the exit status the first signal asks for (128+n), or 0.
func (sg *signals) code() int {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if n, ok := sg.first.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 0
}

func (sg *signals) setChild(p *os.Process) {
	sg.mu.Lock()
	sg.child = p
	sg.mu.Unlock()
}

// runChild runs argv in the foreground with env (stdin passed on: the
// starter may read it) and returns its exit status.
func runChild(sg *signals, argv, env []string, dir string, stdout, stderr io.Writer) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "stack: ERROR: %v\n", err)
		return 127
	}
	sg.setChild(cmd.Process)
	err := cmd.Wait()
	sg.setChild(nil)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if st, ok := exit.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			return 128 + int(st.Signal())
		}
		return exit.ExitCode()
	default:
		fmt.Fprintf(stderr, "stack: ERROR: %v\n", err)
		return 1
	}
}

// upCommand is `stack up --profile NAME`: a profile's services started (or
// reused) and left running; `stop` ends them.
func upCommand(load loader, log *logger) *cobra.Command {
	profile := string(Dev)
	cmd := &cobra.Command{
		Use:   "up [--profile NAME]",
		Short: "Start a profile's services (or reuse what runs) and leave them running",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if !known(table, Profile(profile)) {
				return fmt.Errorf("no profile %q in the service table", profile)
			}
			s, err := load(false)
			if err != nil {
				return err
			}
			s.StopOnExit = false
			sg := catchSignals()
			sv := newSupervisor(s, table, Profile(profile))
			if err := sv.up(sg.ctx); err != nil {
				reportUpError(log, err)
				sv.cleanup()
				return exitCode(orCode(sg.code(), 1))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&profile, "profile", profile, "the services to run: dev, eval, cluster or cluster-server (the cluster's Temporal server alone)")
	return cmd
}

// stopCommand is `stop` (and `cluster-stop`): a dev session, then every
// recorded service. It fails, leaving the Firestore emulator running, when
// the emulator's data cannot be saved, unless --force.
func stopCommand(load loader, use, short string, p Profile) *cobra.Command {
	force := false
	cmd := &cobra.Command{Use: use + " [--force]", Short: short, Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			s, err := load(true)
			if err != nil {
				return err
			}
			sv := newSupervisor(s, table, p)
			sv.force = force
			if !sv.stopRecorded() {
				return exitCode(1)
			}
			return nil
		}}
	cmd.Flags().BoolVar(&force, "force", false, "stop the Firestore emulator even when its data cannot be saved (what changed since the last save is lost)")
	return cmd
}
