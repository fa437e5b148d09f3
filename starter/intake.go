package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/intake/source"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/gpubsub"
	"github.com/secops-agent/investigator/internal/smallfile"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/telemetry"
)

type intakeOptions struct {
	subscription   string
	listen         string
	tokenFile      string
	deadLetter     string
	resultsTopic   string
	slack          bool
	repeatWindow   time.Duration
	groupWindow    time.Duration
	noGroup        bool
	maxRunning     int
	dailyBudget    float64
	idleTimeout    time.Duration
	maxOutstanding int
	// approvalTimeout is starter investigate's --approval-timeout for the
	// investigations the intake starts.
	approvalTimeout time.Duration
}

func (a *app) intakeCommand() *cobra.Command {
	var o intakeOptions
	cmd := &cobra.Command{
		Use: "intake",
		// A service of its own for OpenTelemetry: a span per alert, not one
		// as long as the process.
		Annotations: map[string]string{serviceAnnotation: "investigator-intake"},
		Short:       "Take alerts in from a Pub/Sub subscription and a webhook, and investigate them (long-running)",
		Long: `Runs until SIGINT or SIGTERM, taking alerts from a Pub/Sub subscription
(--subscription, with flow control; PUBSUB_EMULATOR_HOST selects the emulator)
and/or a webhook (--listen: POST /v1/alerts with the bearer token of
--token-file, at least 16 bytes, one alert of at most 1 MiB per request; 202
with the alert and workflow IDs, 400 with the reason, 429 with Retry-After
when it sheds load). An alert may come bare, as a Security Command Center
notification, an EventBridge event or a Pub/Sub push body (from a relay that
adds the bearer token: the webhook checks no OIDC token, so a push
subscription's own requests get 401); it is validated as starter investigate
validates a file and stored in Firestore.

The admission workflow of the task queue (one for every intake process) then
decides what becomes of it:
  - a new identity (GuardDuty account and finding ID, SCC finding name, an
    id field, else the content) starts an investigation, at most
    --max-running at once across all intakes; the rest wait, highest
    severity first, then oldest;
  - the same identity while its investigation is open is news for it
    ("seen again: count 214 → 310"), seen by the model from its next turn;
  - after it closed, within --repeat-window, it is a repeat: recorded, not
    investigated again unless its severity rose;
  - an alert sharing a source address, user or resource with an
    investigation opened within --group-window joins it as a related alert
    (a concluded one asks itself whether it changes the verdict);
    --no-group turns this off;
  - with --daily-budget-usd, once the day's estimated cost reaches it, only
    critical alerts start; the rest wait for the next UTC day or
    starter intake release.
A Pub/Sub message is acknowledged only once that is recorded; a malformed
one goes to --dead-letter-topic with the reason as its "reason" attribute.

Each conclusion and verdict change is delivered to Slack (the worker's
SLACK_WEBHOOK_URL, with --slack) and/or published to --results-topic.`,
		Example: `  starter intake --subscription projects/demo-investigator/subscriptions/alerts-intake \
    --dead-letter-topic projects/demo-investigator/topics/alerts-dead-letter \
    --results-topic projects/demo-investigator/topics/verdicts --max-running 10
  starter intake --listen 127.0.0.1:8090 --token-file .data/intake-token --no-group
  starter intake status
  starter intake release --all`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runIntake(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.subscription, "subscription", config.Env("", "INTAKE_SUBSCRIPTION"), "Pub/Sub subscription to take alerts from, projects/P/subscriptions/S (env INTAKE_SUBSCRIPTION)")
	f.StringVar(&o.listen, "listen", config.Env("", "INTAKE_LISTEN"), "address of the webhook, like 127.0.0.1:8090: POST /v1/alerts (env INTAKE_LISTEN)")
	f.StringVar(&o.tokenFile, "token-file", config.Env("", "INTAKE_TOKEN_FILE"), "file holding the webhook's bearer token (env INTAKE_TOKEN_FILE)")
	f.StringVar(&o.deadLetter, "dead-letter-topic", config.Env("", "INTAKE_DEAD_LETTER_TOPIC"), "topic for malformed and oversized messages, projects/P/topics/T, with the reason as an attribute (env INTAKE_DEAD_LETTER_TOPIC)")
	f.StringVar(&o.resultsTopic, "results-topic", config.Env("", "INTAKE_RESULTS_TOPIC"), "topic each conclusion is published to as JSON, projects/P/topics/T (env INTAKE_RESULTS_TOPIC)")
	f.BoolVar(&o.slack, "slack", config.Env("", "SLACK_WEBHOOK_URL") != "", "post each conclusion to Slack through the worker's SLACK_WEBHOOK_URL (default: on when SLACK_WEBHOOK_URL is set here)")
	f.DurationVar(&o.repeatWindow, "repeat-window", intake.DefaultRepeatWindow, "after an investigation closed, how long its identity's alerts are repeats (recorded, not investigated again unless the severity rose)")
	f.DurationVar(&o.groupWindow, "group-window", intake.DefaultGroupWindow, "how long after an investigation opened alerts sharing its source address, user or resource join it")
	f.BoolVar(&o.noGroup, "no-group", false, "do not group alerts: every identity gets its own investigation")
	f.IntVar(&o.maxRunning, "max-running", intake.DefaultMaxRunning, "most investigations running at once, across all intakes of the task queue (concluded ones waiting for follow-ups do not count)")
	f.Float64Var(&o.dailyBudget, "daily-budget-usd", 0, "estimated cost of a UTC day's investigations after which only critical alerts start (0: no ceiling)")
	f.DurationVar(&o.idleTimeout, "idle-timeout", investigation.DefaultIdleTimeout, "how long a concluded investigation stays open for follow-ups and related alerts")
	config.EnvDurationVar(f, &o.approvalTimeout, "approval-timeout", investigation.DefaultApprovalTimeout,
		"how long an action an investigation asks for (a call of an MCP tool that acts) waits for starter approve-call or deny-call before it expires, not run; a waiting investigation holds its --max-running slot (env INTAKE_APPROVAL_TIMEOUT)", "INTAKE_APPROVAL_TIMEOUT")
	f.IntVar(&o.maxOutstanding, "max-outstanding", 100, "flow control: most Pub/Sub messages this intake holds at once, and most webhook calls in flight")
	cmd.AddCommand(a.intakeStatusCommand(), a.intakeReleaseCommand(), a.intakeSetupCommand(), a.intakePullCommand())
	return cmd
}

// settings are the options as the admission workflow applies them.
func (o intakeOptions) settings(a *app) intake.Settings {
	return intake.Settings{
		MaxRunning: o.maxRunning, DailyBudgetUSD: o.dailyBudget,
		RepeatWindow: investigation.Duration(o.repeatWindow), GroupWindow: investigation.Duration(o.groupWindow), NoGroup: o.noGroup,
		IdleTimeout:     investigation.Duration(o.idleTimeout),
		ApprovalTimeout: investigation.Duration(o.approvalTimeout),
		Delivery:        investigation.Delivery{Slack: o.slack, ResultsTopic: o.resultsTopic},
		Prices:          a.prices,
	}
}

// check refuses options that cannot work, before anything starts.
func (o intakeOptions) check(s intake.Settings) error {
	switch {
	case o.subscription == "" && o.listen == "":
		return errors.New("nothing to take alerts from: give --subscription, --listen, or both")
	case o.listen != "" && o.tokenFile == "":
		return errors.New("--listen needs --token-file: the webhook takes only callers that present its bearer token")
	case o.repeatWindow <= 0:
		return fmt.Errorf("--repeat-window must be positive, not %s", o.repeatWindow)
	case o.groupWindow <= 0:
		return fmt.Errorf("--group-window must be positive, not %s", o.groupWindow)
	case o.idleTimeout <= 0:
		return fmt.Errorf("--idle-timeout must be positive, not %s", o.idleTimeout)
	case o.approvalTimeout <= 0:
		return fmt.Errorf("--approval-timeout must be positive, not %s", o.approvalTimeout)
	case o.maxOutstanding < 1:
		return fmt.Errorf("--max-outstanding must be at least 1, not %d", o.maxOutstanding)
	}
	if o.subscription != "" {
		if _, err := gpubsub.ParseSubscription(o.subscription); err != nil {
			return fmt.Errorf("--subscription: %w", err)
		}
	}
	for flag, topic := range map[string]string{"--dead-letter-topic": o.deadLetter, "--results-topic": o.resultsTopic} {
		if topic == "" {
			continue
		}
		if _, err := gpubsub.ParseTopic(topic); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	return s.Check()
}

// maxTokenFileBytes bounds the token file: one token on one line.
const maxTokenFileBytes = 64 << 10

// minTokenBytes is the shortest webhook token taken: the webhook is open to
// whoever reaches its address, and a short token is guessed.
const minTokenBytes = 16

// readToken reads the webhook's bearer token.
func readToken(path string) (string, error) {
	raw, err := smallfile.Read(path, maxTokenFileBytes)
	if err != nil {
		return "", fmt.Errorf("--token-file: cannot read %s: %w", path, err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("--token-file: %s must hold one token on one line", path)
	}
	if len(token) < minTokenBytes {
		return "", fmt.Errorf("--token-file: the token in %s is %d bytes, under the %d the webhook needs (make one with: openssl rand -hex 24)", path, len(token), minTokenBytes)
	}
	return token, nil
}

func (a *app) runIntake(cmd *cobra.Command, o intakeOptions) error {
	ctx := cmd.Context()
	settings := o.settings(a)
	if err := o.check(settings); err != nil {
		return err
	}
	var token string
	if o.listen != "" {
		var err error
		if token, err = readToken(o.tokenFile); err != nil {
			return err
		}
	}
	log := a.logger()
	store, done, err := a.alertStore(cmd)
	if err != nil {
		return err
	}
	defer done()
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	clients := &gpubsub.Clients{}
	defer clients.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batcher := &source.Batcher{Admit: c.Admit, Settings: settings, Linger: 20 * time.Millisecond, InFlight: 4}
	pipeline := &source.Pipeline{Store: store, Batcher: batcher, CallTimeout: a.timeout(), Log: log}
	if a.tel != nil {
		pipeline.Span, pipeline.Traceparent = a.tel.Span, telemetry.Traceparent
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { batcher.Run(ctx) })
	var listener net.Listener
	if o.listen != "" {
		if listener, err = net.Listen("tcp", o.listen); err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
	}
	out := cmd.ErrOrStderr()
	fmt.Fprintf(out, "intake: task queue %s, admission workflow %s; at most %d running, repeat window %s, %s, idle timeout %s, approval timeout %s%s\n",
		a.temporal.TaskQueue, intake.AdmissionID(a.temporal.TaskQueue), o.maxRunning, settings.RepeatWindow, groupText(settings), settings.IdleTimeout, settings.ApprovalTimeout, budgetText(o))
	if o.subscription != "" {
		ps := &source.PubSub{Subscription: o.subscription, DeadLetterTopic: o.deadLetter, Clients: clients, Pipeline: pipeline,
			MaxOutstanding: o.maxOutstanding, Log: log, Backoff: time.Second}
		wg.Go(func() {
			if err := ps.Run(ctx); err != nil {
				errs <- err
			}
		})
		fmt.Fprintf(out, "intake: taking alerts from %s%s\n", o.subscription, deadLetterText(o.deadLetter))
	}
	var srv *http.Server
	if listener != nil {
		h := &source.HTTP{Token: token, Pipeline: pipeline, MaxInFlight: o.maxOutstanding, Log: log}
		srv = &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
		wg.Go(func() {
			if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("the webhook stopped: %w", err)
			}
		})
		fmt.Fprintf(out, "intake: webhook on http://%s/v1/alerts\n", listener.Addr())
	}
	if o.resultsTopic != "" || o.slack {
		fmt.Fprintf(out, "intake: verdicts to %s\n", deliveryText(o))
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	if srv != nil {
		// Calls in flight finish (or nack) before the intake exits.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = srv.Shutdown(sctx)
		scancel()
	}
	cancel()
	wg.Wait()
	fmt.Fprintln(out, "intake: stopped")
	return runErr
}

func groupText(s intake.Settings) string {
	if s.NoGroup {
		return "no grouping"
	}
	return "group window " + s.GroupWindow.String()
}

func budgetText(o intakeOptions) string {
	if o.dailyBudget <= 0 {
		return ""
	}
	return fmt.Sprintf(", daily budget %.2f USD", o.dailyBudget)
}

func deadLetterText(topic string) string {
	if topic == "" {
		return " (no --dead-letter-topic: malformed messages are not acknowledged)"
	}
	return ", malformed ones to " + topic
}

func deliveryText(o intakeOptions) string {
	var to []string
	if o.slack {
		to = append(to, "Slack (the worker's SLACK_WEBHOOK_URL)")
	}
	if o.resultsTopic != "" {
		to = append(to, o.resultsTopic)
	}
	return strings.Join(to, " and ")
}

func (a *app) intakeStatusCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the intake of the task queue: running, waiting, repeats, grouped, spent today",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(func(c *agentclient.Client) error {
				st, err := c.IntakeStatus(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return agentclient.WriteJSON(cmd.OutOrStdout(), st)
				}
				renderIntakeStatus(cmd.OutOrStdout(), a.temporal.TaskQueue, st)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

// renderIntakeStatus writes the admission workflow's status for people.
func renderIntakeStatus(w io.Writer, queue string, st intake.Status) {
	s := st.Settings
	fmt.Fprintf(w, "Intake of task queue %s (workflow %s, since %s UTC)\n", queue, intake.AdmissionID(queue), st.Since.UTC().Format(time.DateTime))
	fmt.Fprintf(w, "  running      %d (at most %d)\n", st.Running, s.MaxRunning)
	fmt.Fprintf(w, "  waiting      %d (%d held by the daily budget)\n", st.Waiting, st.Held)
	fmt.Fprintf(w, "  concluded    %d (open for follow-ups and related alerts)\n", st.Concluded)
	fmt.Fprintf(w, "  repeats      %d\n", st.Repeats)
	fmt.Fprintf(w, "  grouped      %d (and %d follow-ups of concluded investigations)\n", st.Grouped, st.FollowUps)
	fmt.Fprintf(w, "  seen again   %d\n", st.SeenAgain)
	budget := "no daily budget"
	if s.DailyBudgetUSD > 0 {
		budget = fmt.Sprintf("daily budget %.2f USD", s.DailyBudgetUSD)
	}
	fmt.Fprintf(w, "  spent today  %.4f %s (%s; %s UTC, estimated from the investigations' usage)\n", st.SpentToday, st.Currency, budget, st.Day)
	if st.Unpriced != "" && s.DailyBudgetUSD > 0 {
		fmt.Fprintf(w, "  budget       the daily budget cannot be kept: model %s has no price (--prices); investigations but critical ones are held until tomorrow (UTC) or released\n", st.Unpriced)
	}
	fmt.Fprintf(w, "  alerts       %d taken, %d investigations started, %d released, %d shed (waiting room full)\n", st.Alerts, st.Started, st.Released, st.Shed)
	if st.StartsFailed > 0 || st.Readmitting > 0 || st.ReadmitsLost > 0 || st.HandBackDropped > 0 || st.GivenUpDropped > 0 {
		fmt.Fprintf(w, "  trouble      %d investigations given up after failed starts (%d alerts past the queue bounds lost with them), %d related alerts waiting for room, %d lost (waiting room full), %d not handed back by closing investigations\n",
			st.StartsFailed, st.GivenUpDropped, st.Readmitting, st.ReadmitsLost, st.HandBackDropped)
	}
	if st.Displaced > 0 {
		fmt.Fprintf(w, "  displaced    %d waiting investigations (%d alerts) given up for alerts of a higher severity (waiting room full)\n", st.Displaced, st.DisplacedAlerts)
	}
	fmt.Fprintf(w, "  settings     repeat window %s, %s, idle timeout %s, approval timeout %s\n", s.RepeatWindow, groupText(s), s.IdleTimeout,
		cmp.Or(s.ApprovalTimeout, investigation.Duration(investigation.DefaultApprovalTimeout)))
	if len(st.Open) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tSTATE\tSEVERITY\tALERTS\tSINCE\tWORKFLOW ID\tTITLE")
	for _, e := range st.Open {
		pos, state := "", e.State
		if e.Position > 0 {
			pos = fmt.Sprint(e.Position)
		}
		if e.Held {
			state = "held"
		}
		if e.StartFailures > 0 {
			state = fmt.Sprintf("waiting (start failed %d×, next %s)", e.StartFailures, e.RetryAt.UTC().Format(time.TimeOnly))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", pos, state, e.Severity, e.Alerts, e.Since.UTC().Format(time.TimeOnly),
			e.WorkflowID, clip.String(termtext.Line(e.Title), 60))
	}
	_ = tw.Flush()
	if st.Dropped > 0 {
		fmt.Fprintf(w, "(%d more not listed)\n", st.Dropped)
	}
}

func (a *app) intakeReleaseCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "release (ID... | --all)",
		Short: "Let investigations held by the daily budget start (by workflow or alert ID)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return errors.New("name the workflow or alert IDs to release, or give --all")
			}
			return a.withClient(func(c *agentclient.Client) error {
				out, err := c.Release(cmd.Context(), intake.Release{IDs: args, All: all})
				if err != nil {
					return err
				}
				for _, id := range out.WorkflowIDs {
					fmt.Fprintf(cmd.OutOrStdout(), "released %s: it starts when a slot is free\n", id)
				}
				if len(out.WorkflowIDs) == 0 && all {
					fmt.Fprintln(cmd.OutOrStdout(), "nothing is waiting")
				}
				if len(out.Unknown) > 0 {
					return fmt.Errorf("not waiting: %s", strings.Join(out.Unknown, ", "))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "release every waiting investigation")
	return cmd
}
