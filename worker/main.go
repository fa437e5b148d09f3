// Command worker runs the investigation worker: it hosts the Investigation
// workflow and its activities on a Temporal task queue.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/activities/bigquery/bqtools"
	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/gemini"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/intel"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/payloadcodec"
	"github.com/secops-agent/investigator/progress"
	"github.com/secops-agent/investigator/telemetry"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
	toolmcp "github.com/secops-agent/investigator/tools/mcp"
	"github.com/secops-agent/investigator/transcript"
	"github.com/secops-agent/investigator/workflows"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		printError(os.Stderr, err)
		os.Exit(1)
	}
}

// maxErrorBytes bounds the error line, as the starter's: a failure from
// outside (a model, an MCP server, a file) can run to pages.
const maxErrorBytes = 1000

// printError prints the error sentence, which may carry outside text, safe
// for a terminal (no escape sequence), on one line, clipped.
func printError(w io.Writer, err error) {
	fmt.Fprintln(w, "worker:", clip.String(strings.Join(strings.Fields(termtext.Line(err.Error())), " "), maxErrorBytes))
}

// storeEndpoint names the Firestore database the worker opened
// (config.Firestore.Target), for the catalog.
func storeEndpoint(fc config.Firestore) *investigation.StoreEndpoint {
	project, emulator := fc.Target()
	return &investigation.StoreEndpoint{Project: project, Database: fc.Database, Emulator: emulator != ""}
}

func newCommand() *cobra.Command {
	var (
		tc       config.Temporal
		fc       config.Firestore
		gc       config.Gemini
		ic       config.Intel
		bc       config.BigQuery
		wc       config.Worker
		logLevel string
		prices   string
		register bool
		mixed    bool
		mcpPath  string
	)
	cmd := &cobra.Command{
		Use:           "worker",
		Short:         "Run the investigation worker (workflows and activities) until SIGINT/SIGTERM",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every setting is checked before anything starts: a bad
			// environment value is an error as a bad flag is.
			if err := config.CheckEnv(cmd.Flags()); err != nil {
				return err
			}
			if err := bc.Check(); err != nil {
				return err
			}
			if err := wc.Check(); err != nil {
				return err
			}
			if err := gc.Check(fc.Project); err != nil {
				return err
			}
			logger, err := config.Logger(logLevel)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var mcpCfg *toolmcp.Config
			if mcpPath != "" {
				if mcpCfg, err = toolmcp.Load(mcpPath); err != nil {
					return err
				}
			}
			table, err := priceTable(prices)
			if err != nil {
				return err
			}
			// With OTEL_EXPORTER_OTLP_ENDPOINT set: traces (Temporal's
			// interceptor, the model calls) and metrics (the SDK's, the
			// product's); without, tel is nil and nothing is exported.
			tel, err := telemetry.Start(ctx, "investigator-worker", logger)
			if err != nil {
				return err
			}
			defer flush(tel, logger)
			fs, err := fc.Client(ctx)
			if err != nil {
				return err
			}
			defer fs.Close()
			warm := startWarmUp(ctx, fs, alerts.NewStore(fs), warmUpTimeout)
			defer warm.stop() // before fs.Close
			llm, err := gc.Client(ctx, fc.Project)
			if err != nil {
				return err
			}
			transcriptCache, alertCache, err := wc.CacheBytes()
			if err != nil {
				return err
			}
			store := alerts.NewStore(fs)
			intelTools, disabled := intel.Tools(ic.Config(), nil)
			alertReader := alerts.NewCache(store, alertCache)
			registry, err := tools.NewRegistry(append([]tools.Tool{tools.NewSearchAlerts(store), tools.NewGetAlert(alertReader), tools.NewAskUser()}, intelTools...)...)
			if err != nil {
				return err
			}
			registry.Disable(disabled...)
			rates, err := ic.Rates()
			if err != nil {
				return err
			}
			for _, g := range registry.RateGroups() {
				registry.RouteTo(g, providerQueue(tc.TaskQueue, g))
			}
			sub, err := subAgent(ctx, bc, fc.Project)
			if err != nil {
				return err
			}
			if sub == nil {
				registry.Disable(tools.Disabled{Name: toolcall.BigQueryAgent, Reason: "BIGQUERY_TABLES_CONFIG is not set"})
			} else if err := registry.Add(bigquery.AgentTool()); err != nil {
				return err
			}
			keys, err := agentclient.PayloadKeys(tc)
			if err != nil {
				return err
			}
			ws := workerSettings(registry, sub, gc.Model, bc.EmbeddingModel, keys, rates)
			ws.Slack = config.Env("", "SLACK_WEBHOOK_URL") != "" // intake.go: where verdicts go
			if mcpCfg != nil {
				// The servers, not their current tool lists: those change
				// on reconnect, and plans record what they used.
				ws.MCP = mcpCfg.Fingerprint()
			}
			fp := ws.fingerprint()
			c, err := agentclient.DialTemporal(tc, logger, tel)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := checkPeers(ctx, c, tc.TaskQueue, buildID(wc), fp, time.Now()); err != nil {
				if !mixed {
					return err
				}
				logger.Warn("starting beside a worker with other settings (--allow-mixed-settings)", "error", err)
			}
			if register {
				registerSearchAttributes(ctx, c, tc.Namespace, logger)
			}

			// Firestore stays the durable store; the caches spare the model
			// turns reading back what earlier activities wrote or read.
			endpoint := gemini.Describe(llm, gc.Model)
			model := &activities.Model{LLM: llm.Models, Name: gc.Model, Transcript: transcript.NewCache(transcript.NewStore(fs), transcriptCache),
				Calls: tel.ModelCalls(provider(endpoint), host(endpoint.BaseURL), table)}
			// Progress is written behind the workflow task that emits it
			// (where the run waits for a person or closes, it waits for the
			// write); what is queued at stop is written before exit.
			behind := progress.NewBehind(progress.NewStore(fs), logger)
			defer func() {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				behind.Close(cctx)
			}()
			inv := &activities.Activities{Model: model, Endpoint: endpoint, Tools: registry, Alerts: alertReader, Progress: behind,
				Store: storeEndpoint(fc)}
			if mcpCfg != nil {
				// MCP tools join the registry as each server connects (and
				// again on reconnect); a server that fails is shown by
				// starter tools with why, and retried.
				servers := toolmcp.New(mcpCfg, registry, logger)
				servers.Connect(ctx)
				watchCtx, stopWatch := context.WithCancel(ctx)
				go servers.Watch(watchCtx)
				defer func() { stopWatch(); servers.Close() }()
				inv.MCP = servers
			}
			intakeActs, closeIntake, err := intakeActivities(c, tc, alertReader)
			if err != nil {
				return err
			}
			defer closeIntake()
			// Poll once the warm-up is done, or after warmUpWait: a first
			// task would wait behind it in the store.
			select {
			case <-warm.done:
			case <-time.After(warmUpWait):
				logger.Info("polling while the store's warm-up goes on", "waited", warmUpWait)
			}
			warm.report(logger)
			w := worker.New(c, tc.TaskQueue, investigationWorkerOptions(wc, fp))
			w.RegisterWorkflowWithOptions(workflows.Investigation, workflow.RegisterOptions{Name: investigation.WorkflowName})
			w.RegisterWorkflowWithOptions(workflows.ToolCatalog, workflow.RegisterOptions{Name: investigation.CatalogWorkflowName})
			w.RegisterWorkflowWithOptions(workflows.BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
			w.RegisterActivity(intakeActs) // the deliveries of the intake's investigations
			if sub != nil {
				sub.Model, sub.Embedder, sub.Memories = model, llm.Models, memory.NewStore(fs)
				w.RegisterActivity(sub)
				inv.Toolsets = map[string]*tools.Registry{bigquery.Toolset: sub.Tools}
			}
			w.RegisterActivity(inv)
			// The provider and admission workers, once started; a failed
			// start stops those already running.
			var others []stopper
			defer func() { stopAll(others) }()
			// Each provider's calls run on a queue of their own, so its rate
			// limit holds for every worker together and one slow provider
			// does not hold up another's calls.
			for _, g := range registry.RateGroups() {
				pw := worker.New(c, providerQueue(tc.TaskQueue, g), providerWorkerOptions(wc, fp, rates[g]))
				pw.RegisterActivity(inv)
				if err := pw.Start(); err != nil {
					return fmt.Errorf("start the %s worker: %w", g, err)
				}
				others = append(others, pw)
				logger.Info("provider queue", "provider", g, "task_queue", providerQueue(tc.TaskQueue, g), "calls_per_second", rates[g])
			}
			if sub != nil && sub.AutoApprove {
				logger.Warn("learned memories are approved without review (--auto-approve-memories): " + config.AutoApproveRisk +
					"; see them with starter memory list, remove one with starter memory reject ID")
			}
			// The intake's admission workflow and its starts have a queue of
			// their own (intake.go).
			aw := worker.New(c, intake.AdmissionQueue(tc.TaskQueue), admissionWorkerOptions(wc, fp))
			aw.RegisterWorkflowWithOptions(workflows.IntakeAdmission, workflow.RegisterOptions{Name: intake.AdmissionWorkflowName})
			aw.RegisterActivity(intakeActs)
			if err := aw.Start(); err != nil {
				return fmt.Errorf("start the intake's admission worker: %w", err)
			}
			others = append(others, aw)
			logger.Info("worker starting", "temporal", tc.Address, "namespace", tc.Namespace, "task_queue", tc.TaskQueue, "settings", fp,
				"deployment_version", deploymentVersion(wc), "model", gc.Model, "tools", registry.Names(), "disabled_tools", len(disabled))
			if err := runWorkers(worker.InterruptCh(), w, others); err != nil {
				return fmt.Errorf("worker stopped: %w", err)
			}
			logger.Info("worker stopped")
			return nil
		},
	}
	cmd.SetContext(context.Background())
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return config.FlagError(err) })
	tc.Flags(cmd.Flags())
	fc.Flags(cmd.Flags())
	gc.Flags(cmd.Flags())
	ic.Flags(cmd.Flags())
	bc.Flags(cmd.Flags())
	wc.Flags(cmd.Flags())
	searchAttributesFlag(cmd.Flags(), &register)
	config.EnvBoolVar(cmd.Flags(), &mixed, "allow-mixed-settings", false,
		"start even when a running worker of the same queue and build has other tools, models, tables or payload keys (env WORKER_ALLOW_MIXED_SETTINGS)", "WORKER_ALLOW_MIXED_SETTINGS")
	cmd.Flags().StringVar(&mcpPath, "mcp-config", config.Env("", "MCP_CONFIG"), "MCP servers whose tools the investigation may call (YAML; see README, \"Bring your own tools\") (env MCP_CONFIG)")
	cmd.Flags().StringVar(&logLevel, "log-level", config.Env("info", "LOG_LEVEL"), "log level: debug, info, warn, error (env LOG_LEVEL)")
	cmd.Flags().StringVar(&prices, "prices", config.Env("", "INVESTIGATOR_PRICES"), "price table (YAML, see internal/pricing/prices.yaml) for the estimated cost the worker exports as a metric with OTEL_EXPORTER_OTLP_ENDPOINT (env INVESTIGATOR_PRICES; default: the shipped Gemini API prices)")
	return cmd
}

// buildID is the build whose workers must agree on settings: "" without
// Worker Deployment Versioning (every worker of the queue).
func buildID(wc config.Worker) string { return deployment(wc).Version.BuildID }

// workerSettings gathers what the workers of one queue must agree on.
// keys may be nil (payloads in clear).
func workerSettings(registry *tools.Registry, sub *bigquery.Activities, model, embedding string, keys *payloadcodec.Keys, rates map[string]float64) settings {
	s := settings{Tools: registry.Tools(), Declarations: declarations(registry), Statuses: registry.Statuses(),
		Model: model, IntelRates: rates}
	if keys != nil {
		s.PayloadKeys = keys.CheckValues()
	}
	if sub != nil {
		s.EmbeddingModel = embedding
		s.Toolsets = map[string]any{bigquery.Toolset: map[string]any{"tables": sub.Tables, "declarations": declarations(sub.Tools)}}
	}
	return s
}

func declarations(r *tools.Registry) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, d := range r.Declarations(nil) {
		raw, _ := json.Marshal(d)
		out[d.Name] = raw
	}
	return out
}

// providerQueue is the task queue of a threat-intelligence provider's calls.
func providerQueue(taskQueue, group string) string { return taskQueue + "-intel-" + group }

// subAgent builds the BigQuery sub-agent's activities (tools, tables and
// recall settings; the caller adds the model and the stores), or returns
// nil when no tables config is set.
func subAgent(ctx context.Context, bc config.BigQuery, project string) (*bigquery.Activities, error) {
	if bc.TablesConfig == "" {
		return nil, nil
	}
	cfg, err := bqtools.LoadConfig(bc.TablesConfig)
	if err != nil {
		return nil, err
	}
	runbooks, err := bqtools.LoadRunbooks(bc.RunbooksDir)
	if err != nil {
		return nil, err
	}
	if cfg.Project == "" {
		cfg.Project = project
	}
	if cfg.Project == "" && bc.EmulatorHost() != "" {
		cfg.Project = config.EmulatorProject
	}
	if cfg.Project == "" {
		return nil, fmt.Errorf("no BigQuery project: set project in %s or GOOGLE_CLOUD_PROJECT", bc.TablesConfig)
	}
	client, err := bqtools.NewClient(ctx, cfg.Project, bc.EmulatorHost())
	if err != nil {
		return nil, err
	}
	reg, err := tools.NewRegistry(bqtools.Tools(client, cfg, runbooks)...)
	if err != nil {
		return nil, err
	}
	sub := &bigquery.Activities{Tools: reg, EmbeddingModel: bc.EmbeddingModel, MinSimilarity: bc.MinSimilarity, RecallLimit: bc.RecallLimit,
		AutoApprove: bc.AutoApproveMemories}
	for _, t := range cfg.Tables {
		sub.Tables = append(sub.Tables, t.ID)
	}
	return sub, nil
}

// deployment turns on Worker Deployment Versioning when the worker names
// its deployment and build: investigations are pinned to the version that
// started them and move to the current one when they continue as new
// (design/versioning.md).
// activityWorkerOptions are what every worker of this binary shares.
// Heartbeats go out as often as activities record them (the SDK would
// otherwise throttle them to 0.8 x the heartbeat timeout), so a stop or a
// cancel reaches an activity within one HeartbeatInterval.
func activityWorkerOptions(wc config.Worker, fp string) worker.Options {
	return worker.Options{
		// A deploy (SIGTERM) lets the model calls in flight finish
		// rather than pay for them twice.
		WorkerStopTimeout:                  wc.StopTimeout,
		MaxConcurrentActivityExecutionSize: wc.MaxConcurrentActivities,
		Interceptors:                       []interceptor.WorkerInterceptor{activities.Heartbeats()},
		MaxHeartbeatThrottleInterval:       activities.HeartbeatInterval,
		DefaultHeartbeatThrottleInterval:   activities.HeartbeatInterval,
		DeploymentOptions:                  deployment(wc),
		Identity:                           identity(fp),
	}
}

// investigationWorkerOptions are the investigation task queue's worker's.
func investigationWorkerOptions(wc config.Worker, fp string) worker.Options {
	o := activityWorkerOptions(wc, fp)
	o.WorkerActivitiesPerSecond = wc.ActivitiesPerSecond
	// Pollers follow the load (SDK defaults: 1 to 100, from 5): many
	// investigations at once wait less for a poller.
	o.WorkflowTaskPollerBehavior = worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{})
	o.ActivityTaskPollerBehavior = worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{})
	// Quick tools run as local activities: the same bounds apply.
	o.MaxConcurrentLocalActivityExecutionSize = wc.MaxConcurrentActivities
	o.WorkerLocalActivitiesPerSecond = wc.ActivitiesPerSecond
	o.TaskQueueActivitiesPerSecond = wc.TaskQueueActivitiesPerSecond
	return o
}

// admissionWorkerOptions are the intake admission queue's worker's: the
// same stop timeout, heartbeats and version as every worker, without the
// activity bounds, which are the model's.
func admissionWorkerOptions(wc config.Worker, fp string) worker.Options {
	return worker.Options{
		WorkerStopTimeout:                wc.StopTimeout,
		Interceptors:                     []interceptor.WorkerInterceptor{activities.Heartbeats()},
		MaxHeartbeatThrottleInterval:     activities.HeartbeatInterval,
		DefaultHeartbeatThrottleInterval: activities.HeartbeatInterval,
		DeploymentOptions:                deployment(wc),
		Identity:                         identity(fp),
	}
}

// providerWorkerOptions are a provider queue's worker's: the provider's
// rate limit holds for every worker of the queue together.
func providerWorkerOptions(wc config.Worker, fp string, rate float64) worker.Options {
	o := activityWorkerOptions(wc, fp)
	o.TaskQueueActivitiesPerSecond = rate
	return o
}

// deploymentVersion names the version the worker serves for its start-up
// log: which one a pod runs is otherwise only in the server's poller list.
func deploymentVersion(wc config.Worker) string {
	if v := deployment(wc).Version; v.BuildID != "" {
		return v.DeploymentName + ":" + v.BuildID
	}
	return "unversioned"
}

func deployment(wc config.Worker) worker.DeploymentOptions {
	if wc.DeploymentName == "" || wc.BuildID == "" {
		return worker.DeploymentOptions{}
	}
	return worker.DeploymentOptions{
		UseVersioning:             true,
		Version:                   worker.WorkerDeploymentVersion{DeploymentName: wc.DeploymentName, BuildID: wc.BuildID},
		DefaultVersioningBehavior: workflow.VersioningBehaviorPinned,
	}
}
