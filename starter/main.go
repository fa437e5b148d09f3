// Command starter is the analyst's CLI: it imports alerts, starts
// investigations on the worker and shows their progress.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/progress"
	"github.com/secops-agent/investigator/telemetry"
)

func main() {
	// Ctrl-C and SIGTERM cancel the command's context: every wait (standard
	// input, Firestore, Temporal, following an investigation, which goes
	// on) ends with one sentence and exit code 130 (SIGINT) or 143
	// (SIGTERM); any other failure exits 1.
	ctx, got, stop := notifyContext(context.Background())
	a := &app{stdin: os.Stdin}
	err := newRootApp(a, os.Stdout).ExecuteContext(ctx)
	stop()
	a.endTelemetry(err != nil)
	if err != nil {
		printError(os.Stderr, err)
		os.Exit(exitCode(got()))
	}
}

// notifyContext is a context that Ctrl-C or SIGTERM cancels; got returns
// the signal that did, or nil.
func notifyContext(parent context.Context) (ctx context.Context, got func() os.Signal, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	var mu sync.Mutex
	var sig os.Signal
	go func() {
		select {
		case s := <-ch:
			mu.Lock()
			sig = s
			mu.Unlock()
			cancel()
		case <-ctx.Done():
		}
	}()
	got = func() os.Signal {
		mu.Lock()
		defer mu.Unlock()
		return sig
	}
	return ctx, got, func() { signal.Stop(ch); cancel() }
}

// exitCode is a failed command's exit code: 128 plus the signal's number
// when a signal ended it (the shell's convention), else 1.
func exitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// maxErrorBytes bounds the error line: a workflow's or a model's failure
// text can run to pages.
const maxErrorBytes = 1000

// printError prints the error sentence, which may quote alert or model
// text, safe for a terminal, on one line (a failure text's lines, or the
// errors joined, separated by "; "), clipped.
func printError(w io.Writer, err error) {
	fmt.Fprintln(w, "error:", clip.String(flatten(termtext.Clean(err.Error())), maxErrorBytes))
}

// flatten joins the non-blank lines of s, each trimmed, with "; " (a
// space after a line that ends its sentence), tabs made spaces.
func flatten(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(strings.ReplaceAll(line, "\t", " "))
		if line == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.ContainsRune(".:;!?", rune(b.String()[b.Len()-1])) {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

// app holds the settings every subcommand shares.
type app struct {
	temporal  config.Temporal
	firestore config.Firestore
	logLevel  string
	// callTimeout bounds each call to Firestore or Temporal.
	callTimeout time.Duration
	stdin       io.Reader
	// dialer replaces the Temporal connection in tests.
	dialer func() (client.Client, error)
	// pricesFile is the price table the cost estimates use ("" for the
	// shipped one), prices the table read from it.
	pricesFile string
	prices     pricing.Table
	// tel exports the command's traces and metrics (nil: not at all);
	// endCommand ends its root span.
	tel        *telemetry.Telemetry
	endCommand func(failed bool)
}

// withClient runs f with a Temporal client, closed afterwards.
func (a *app) withClient(f func(*agentclient.Client) error) error {
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

// dial connects to Temporal with the app's settings. Progress is read from
// where the workers store it, beside the transcript; without Firestore
// settings the follower asks Temporal.
func (a *app) dial() (*agentclient.Client, error) {
	fs, err := a.firestore.Client(context.Background())
	if err != nil {
		return a.dialWith(nil, nil)
	}
	c, err := a.dialWith(fs, func() { fs.Close() })
	if err != nil {
		fs.Close()
	}
	return c, err
}

// dialWith connects to Temporal, the follower reading progress through fs
// (nil: through Temporal); onClose runs when the client closes.
func (a *app) dialWith(fs *firestore.Client, onClose func()) (*agentclient.Client, error) {
	o := agentclient.Options{Temporal: a.temporal, CallTimeout: a.timeout(), Logger: a.logger(), Prices: a.prices, Telemetry: a.tel, OnClose: onClose}
	if a.dialer != nil {
		c, err := a.dialer()
		if err != nil {
			return nil, err
		}
		return agentclient.New(c, o)
	}
	if fs != nil {
		o.Progress, o.ProgressUnreachable = progress.NewStore(fs), a.firestoreUnreachable
	}
	return agentclient.Dial(o)
}

func (a *app) logger() *slog.Logger {
	l, err := config.Logger(a.logLevel)
	if err != nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l
}

func newRoot(stdin io.Reader, stdout io.Writer) *cobra.Command {
	return newRootApp(&app{stdin: stdin}, stdout)
}

func newRootApp(a *app, stdout io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "starter",
		Short: "Investigate security alerts with a durable LLM agent on Temporal",
		Long: `starter imports security alerts into Firestore, starts investigations on the
investigation worker (Temporal) and shows their progress as it happens. While
an investigation runs, and after it concluded (it stays open for follow-up
questions), steer it: hint, approve, revise, answer, stop, ask; and look at
it: watch, status, tree.

Environment (each also a flag):
  TEMPORAL_ADDRESS         Temporal frontend (default localhost:7233)
  TEMPORAL_NAMESPACE       namespace (default "default")
  TEMPORAL_TASK_QUEUE      worker task queue (default "investigations")
  TEMPORAL_UI_URL          Web UI base URL for links (default http://localhost:8233)
  GOOGLE_CLOUD_PROJECT     Firestore project (demo-investigator with the emulator)
  FIRESTORE_EMULATOR_HOST  use the local Firestore emulator at host:port
  FIRESTORE_DATABASE       Firestore database ID (default "(default)")
  INVESTIGATOR_PRICES      price table for cost estimates (default: shipped prices)
The worker also reads GEMINI_API_KEY / GOOGLE_API_KEY, GOOGLE_GENAI_USE_VERTEXAI,
GOOGLE_CLOUD_LOCATION, GOOGLE_GEMINI_BASE_URL and GEMINI_MODEL.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Everything a command prints passes through termtext: alert fields,
	// tool output and model text cannot drive the terminal. Warnings and,
	// under --json, the lines for people go to standard error.
	root.SetOut(termtext.NewWriter(stdout))
	root.SetErr(termtext.NewWriter(os.Stderr))
	// Every subcommand's bad flag value is one sentence naming the flag
	// and its form, not the parser's error.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return config.FlagError(err) })
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := config.CheckEnv(cmd.Flags()); err != nil {
			return err
		}
		if a.callTimeout <= 0 {
			return fmt.Errorf("--call-timeout must be positive, not %s", a.callTimeout)
		}
		if _, err := config.Logger(a.logLevel); err != nil {
			return fmt.Errorf("--log-level: %w", err)
		}
		if err := a.startTelemetry(cmd); err != nil {
			return err
		}
		a.prices = pricing.Default()
		if a.pricesFile != "" {
			t, err := pricing.Load(a.pricesFile)
			if err != nil {
				return err
			}
			a.prices = t
		}
		return nil
	}
	a.temporal.Flags(root.PersistentFlags())
	a.firestore.Flags(root.PersistentFlags())
	root.PersistentFlags().DurationVar(&a.callTimeout, "call-timeout", agentclient.DefaultCallTimeout, "how long to wait for each answer from Firestore or Temporal before giving up with a message")
	root.PersistentFlags().StringVar(&a.pricesFile, "prices", config.Env("", "INVESTIGATOR_PRICES"), "price table (YAML, see internal/pricing/prices.yaml) for the estimated cost of model calls (env INVESTIGATOR_PRICES; default: the shipped Gemini API prices)")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", config.Env("warn", "LOG_LEVEL"), "log level of the Temporal client: debug, info, warn, error (env LOG_LEVEL)")
	root.AddCommand(a.investigateCommand(), a.watchCommand(), a.statusCommand(), a.cancelCommand())
	root.AddCommand(a.steerCommands()...)
	root.AddCommand(a.alertCommand(), a.toolsCommand(), a.treeCommand(), a.memoryCommand())
	root.AddCommand(a.codecServerCommand(), a.evalCommand(), a.intakeCommand())
	return root
}
