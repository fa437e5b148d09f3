// Package activities holds the Investigation workflow's activities: every
// model call and every tool call. Prompts are filled here, from templates
// embedded next to this code, so changing a prompt never breaks replay.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/tools"
	"github.com/secops-agent/investigator/transcript"
)

// ErrMalformedOutput is the error type of a model answer that could not be
// used even after one corrective retry within the activity.
const ErrMalformedOutput = "MalformedModelOutput"

// ErrAlertNotFound is the error type when the investigated alert is not stored.
const ErrAlertNotFound = "AlertNotFound"

// generator is the part of the genai client the activities use
// (*genai.Models satisfies it).
type generator interface {
	GenerateContent(ctx context.Context, model string, contents []*genai.Content, config *genai.GenerateContentConfig) (*genai.GenerateContentResponse, error)
}

type alertReader interface {
	Get(ctx context.Context, id string) (alerts.Alert, error)
}

type transcriptStore interface {
	Put(ctx context.Context, session, key string, e transcript.Entry) error
	GetAll(ctx context.Context, session string, keys []string) ([]transcript.Entry, error)
}

// Activities holds the dependencies of every activity; the worker registers
// one value of it.
type Activities struct {
	LLM   generator
	Model string
	// Endpoint names the model and where it is served, for the catalog.
	Endpoint   investigation.ModelEndpoint
	Tools      *tools.Registry
	Alerts     alertReader
	Transcript transcriptStore

	// The BigQuery sub-agent's dependencies; BigQueryTools is nil when
	// BigQuery is not configured.
	BigQueryTools       *tools.Registry
	Embedder            embedder
	EmbeddingModel      string
	Memories            memoryStore
	MemoryMinSimilarity float64
	MemoryLimit         int
	// BigQueryTables are the tables the sub-agent may query: a learned
	// claim must name one of them.
	BigQueryTables []string
}

// logger returns the activity's logger (with the workflow and activity IDs
// Temporal adds), or slog's default outside an activity (unit tests).
func logger(ctx context.Context) log.Logger {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return log.NewStructuredLogger(slog.Default())
}

// HeartbeatInterval is how often a waiting model call heartbeats, so a
// worker that dies mid-call is noticed within the heartbeat timeout instead
// of the call's start-to-close timeout.
const HeartbeatInterval = 5 * time.Second

// heartbeat records activity heartbeats until the returned stop is called.
func heartbeat(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// generate calls the model once, classifying errors for Temporal's retries.
func (a *Activities) generate(ctx context.Context, contents []*genai.Content, cfg *genai.GenerateContentConfig) (*genai.GenerateContentResponse, investigation.Usage, error) {
	defer heartbeat(ctx)()
	resp, err := callGemini(ctx, func(ctx context.Context) (*genai.GenerateContentResponse, error) {
		return a.LLM.GenerateContent(ctx, a.Model, contents, cfg)
	})
	if err != nil {
		return nil, investigation.Usage{}, err
	}
	u := investigation.Usage{Calls: 1}
	if m := resp.UsageMetadata; m != nil {
		u.PromptTokens = int(m.PromptTokenCount)
		u.OutputTokens = int(m.CandidatesTokenCount)
	}
	return resp, u, nil
}

// generateJSON asks for structured output and decodes it into out. When the
// answer does not decode or check passes it, the model is asked once more
// with the problem named; a second failure is a non-retryable error.
func (a *Activities) generateJSON(ctx context.Context, what string, p phasePrompt, schema *genai.Schema, out any, check func() error) (investigation.Usage, error) {
	cfg := &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText(p.system, genai.RoleUser),
		ResponseMIMEType:  "application/json",
		ResponseSchema:    schema,
	}
	contents := []*genai.Content{genai.NewContentFromText(p.user, genai.RoleUser)}
	var total investigation.Usage
	var problem error
	for attempt := 1; attempt <= 2; attempt++ {
		resp, u, err := a.generate(ctx, contents, cfg)
		if err != nil {
			return total, err
		}
		total = total.Add(u)
		text := answerText(resp)
		if problem = decodeJSON(text, out); problem == nil {
			if problem = check(); problem == nil {
				return total, nil
			}
		}
		contents = append(contents,
			genai.NewContentFromText(text, genai.RoleModel),
			genai.NewContentFromText("That answer cannot be used: "+problem.Error()+". Answer again with JSON only, matching the schema.", genai.RoleUser))
	}
	return total, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("the model's %s answer was unusable twice: %v", what, problem), ErrMalformedOutput, problem)
}

// decodeJSON reads a JSON object from model text, tolerating a Markdown fence.
func decodeJSON(text string, out any) error {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "```") {
		text = strings.TrimPrefix(strings.TrimPrefix(text, "```json"), "```")
		text = strings.TrimSuffix(strings.TrimSpace(text), "```")
	}
	if text == "" {
		return errors.New("the answer is empty")
	}
	if err := json.Unmarshal([]byte(text), out); err != nil {
		return fmt.Errorf("the answer is not valid JSON for the schema: %v", err)
	}
	return nil
}

// answerText returns the non-thought text of the first candidate.
func answerText(resp *genai.GenerateContentResponse) string {
	if resp == nil || len(resp.Candidates) == 0 || resp.Candidates[0].Content == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range resp.Candidates[0].Content.Parts {
		if p != nil && !p.Thought && p.Text != "" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// loadAlert reads the investigated alert; a missing alert cannot be fixed by
// retrying.
func (a *Activities) loadAlert(ctx context.Context, id string) (alerts.Alert, error) {
	al, err := a.Alerts.Get(ctx, id)
	if errors.Is(err, alerts.ErrNotFound) {
		return al, temporal.NewNonRetryableApplicationError(fmt.Sprintf("alert %q is not in the alert store; import it first", id), ErrAlertNotFound, err)
	}
	if err != nil {
		return al, fmt.Errorf("load alert %s: %w", id, err)
	}
	return al, nil
}
