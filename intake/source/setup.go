package source

import (
	"context"
	"time"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/gpubsub"
)

// SetupPubSub creates in project, where missing, what the local stack's
// intake uses: the topics alerts, alerts-dead-letter and verdicts, the
// subscription alerts-intake on alerts, and the watch subscriptions that
// keep what the other two topics receive (starter intake setup, the stack).
func SetupPubSub(ctx context.Context, clients *gpubsub.Clients, project string) error {
	for _, t := range []string{intake.TopicAlerts, intake.TopicDeadLetter, intake.TopicVerdicts} {
		if err := clients.EnsureTopic(ctx, intake.Topic(project, t)); err != nil {
			return err
		}
	}
	for _, s := range [][2]string{
		{intake.SubscriptionIntake, intake.TopicAlerts},
		{intake.SubscriptionDeadLetters, intake.TopicDeadLetter},
		{intake.SubscriptionVerdicts, intake.TopicVerdicts},
	} {
		if err := clients.EnsureSubscription(ctx, intake.Subscription(project, s[0]), intake.Topic(project, s[1]), 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}
