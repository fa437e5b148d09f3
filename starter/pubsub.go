package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/intake/source"
	"github.com/secops-agent/investigator/internal/gpubsub"
	"github.com/secops-agent/investigator/internal/smallfile"
	"github.com/secops-agent/investigator/internal/termtext"
)

// pubsubProject is the project of the Pub/Sub names the commands default
// to: GOOGLE_CLOUD_PROJECT (--project), or demo-investigator with the
// emulator.
func (a *app) pubsubProject() (string, error) {
	if a.firestore.Project != "" {
		return a.firestore.Project, nil
	}
	if os.Getenv("PUBSUB_EMULATOR_HOST") != "" {
		return config.EmulatorProject, nil
	}
	return "", errors.New("no Pub/Sub project: set GOOGLE_CLOUD_PROJECT (or PUBSUB_EMULATOR_HOST for the local emulator)")
}

func (a *app) intakeSetupCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "setup",
		Short: "Create the intake's Pub/Sub topics and subscriptions in the project (if missing)",
		Long: `Creates, in the project of --project (GOOGLE_CLOUD_PROJECT; demo-investigator
with PUBSUB_EMULATOR_HOST), what the local stack's intake uses: the topics
alerts, alerts-dead-letter and verdicts, the subscription alerts-intake on
alerts, and the subscriptions alerts-dead-letter-watch and verdicts-watch that
keep what the other two topics receive (starter intake pull reads them).
Whatever exists already is left as it is.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			project, err := a.pubsubProject()
			if err != nil {
				return err
			}
			clients := &gpubsub.Clients{}
			defer clients.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout())
			defer cancel()
			if err := source.SetupPubSub(ctx, clients, project); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Pub/Sub in %s: topics %s, %s, %s; subscriptions %s, %s, %s\n", project,
				intake.TopicAlerts, intake.TopicDeadLetter, intake.TopicVerdicts, intake.SubscriptionIntake, intake.SubscriptionDeadLetters, intake.SubscriptionVerdicts)
			return nil
		},
	}
}

func (a *app) intakePullCommand() *cobra.Command {
	var wait time.Duration
	var max int
	cmd := &cobra.Command{
		Use:   "pull SUBSCRIPTION",
		Short: "Print (and acknowledge) the messages of a subscription as JSON lines, such as verdicts-watch",
		Long: `Reads messages from a subscription, prints each as one JSON line (message ID,
attributes, and the data as JSON when it is JSON, else as text), and
acknowledges it. It stops after --max messages, or when none came for --wait.
A short name is a subscription of the project (--project).`,
		Example: `  starter intake pull verdicts-watch
  starter intake pull projects/demo-investigator/subscriptions/alerts-dead-letter-watch --wait 2s`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if _, err := gpubsub.ParseSubscription(name); err != nil {
				project, perr := a.pubsubProject()
				if perr != nil {
					return perr
				}
				name = intake.Subscription(project, name)
			}
			project, err := gpubsub.ParseSubscription(name)
			if err != nil {
				return err
			}
			clients := &gpubsub.Clients{}
			defer clients.Close()
			client, err := clients.Client(cmd.Context(), project)
			if err != nil {
				return err
			}
			// One bounded call first: an unreachable Pub/Sub or a missing
			// subscription is one sentence, not a quiet --wait.
			err = agentclient.Bounded(cmd.Context(), a.timeout(), "Pub/Sub", func() string {
				return fmt.Sprintf("Pub/Sub did not answer within %s (subscription %s)", a.timeout(), name)
			}, func(ctx context.Context) error {
				if _, err := client.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: name}); err != nil {
					return gpubsub.Error("subscription "+name, err)
				}
				return nil
			})
			if err != nil {
				return err
			}
			return pull(cmd.Context(), client.Subscriber(name), cmd, wait, max, a.timeout())
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Second, "stop when no message came for this long")
	cmd.Flags().IntVar(&max, "max", 1000, "stop after this many messages")
	return cmd
}

// pull prints messages until max, a quiet wait or the end of ctx (Ctrl-C).
func pull(ctx context.Context, sub *pubsub.Subscriber, cmd *cobra.Command, wait time.Duration, max int, callTimeout time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := 0
	out := make(chan []byte, 16)
	sub.ReceiveSettings.MaxOutstandingMessages = 16
	// Without a shutdown timeout, Receive returns only once its stream
	// closes, which against an unreachable Pub/Sub is never: every stop
	// (--max, --wait, Ctrl-C) then hung. Messages not printed go back.
	sub.ReceiveSettings.ShutdownOptions = &pubsub.ShutdownOptions{Timeout: callTimeout, Behavior: pubsub.ShutdownBehaviorNackImmediately}
	errc := make(chan error, 1)
	go func() {
		errc <- sub.Receive(ctx, func(_ context.Context, m *pubsub.Message) {
			line := map[string]any{"message_id": m.ID, "attributes": m.Attributes, "publish_time": m.PublishTime.UTC()}
			var data any
			if json.Unmarshal(m.Data, &data) == nil {
				line["data"] = data
			} else {
				line["data_text"] = string(m.Data)
			}
			b, _ := json.Marshal(line)
			select {
			case out <- b:
				m.Ack()
			case <-ctx.Done():
				m.Nack()
			}
		})
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for n < max {
		select {
		case b := <-out:
			fmt.Fprintln(cmd.OutOrStdout(), termtext.Line(string(b)))
			n++
			timer.Reset(wait)
		case <-timer.C:
			cancel()
			<-errc
			return nil
		case err := <-errc:
			if err != nil && ctx.Err() == nil {
				return gpubsub.Error("pull "+sub.String(), err)
			}
			return nil
		}
	}
	cancel()
	<-errc
	return nil
}

// alertPublishCommand publishes alert files to the intake's topic.
func (a *app) alertPublishCommand() *cobra.Command {
	var topic string
	var raw bool
	cmd := &cobra.Command{
		Use:   "publish FILE...",
		Short: "Publish alert files (or - for stdin) to the intake's Pub/Sub topic",
		Long: `Publishes each alert file as one Pub/Sub message to --topic (default
projects/PROJECT/topics/alerts; PUBSUB_EMULATOR_HOST selects the emulator),
where starter intake takes it. Each file is validated as starter investigate
validates it first, unless --raw (to try the intake's dead-letter path).`,
		Example: `  starter alert publish examples/alerts/*.json
  starter alert publish --topic projects/my-project/topics/alerts finding.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if topic == "" {
				project, err := a.pubsubProject()
				if err != nil {
					return err
				}
				topic = intake.Topic(project, intake.TopicAlerts)
			}
			if _, err := gpubsub.ParseTopic(topic); err != nil {
				return fmt.Errorf("--topic: %w", err)
			}
			clients := &gpubsub.Clients{}
			defer clients.Close()
			var errs []error
			for _, path := range args {
				data, err := a.publishable(cmd.Context(), path, raw)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				var id string
				err = agentclient.Bounded(cmd.Context(), a.timeout(), "Pub/Sub", func() string {
					return fmt.Sprintf("Pub/Sub did not answer within %s (topic %s)", a.timeout(), topic)
				}, func(ctx context.Context) (err error) {
					id, err = clients.Publish(ctx, topic, &pubsub.Message{Data: data})
					return err
				})
				if err != nil {
					return errors.Join(append(errs, err)...)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "published %s to %s as message %s\n", displayName(path), topic, id)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVar(&topic, "topic", config.Env("", "INTAKE_TOPIC"), "topic to publish to, projects/P/topics/T (env INTAKE_TOPIC; default the project's alerts topic)")
	cmd.Flags().BoolVar(&raw, "raw", false, "publish the files as they are, without validating them")
	return cmd
}

// maxRawBytes bounds a --raw file: Pub/Sub refuses a message over 10 MB.
const maxRawBytes = 10 << 20

// publishable reads one file and, unless raw, validates it as an alert.
func (a *app) publishable(ctx context.Context, path string, raw bool) ([]byte, error) {
	if raw {
		data, err := smallfile.Read(path, maxRawBytes)
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %w", path, err)
		}
		return data, nil
	}
	data, err := alerts.Read(ctx, path, a.stdin)
	if err != nil {
		return nil, err
	}
	if _, err := alerts.Parse(data); err != nil {
		return nil, fmt.Errorf("%s: %w (--raw publishes it as it is)", displayName(path), err)
	}
	return data, nil
}
