package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/telemetry"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/transcript"
)

// Generator is the part of the genai client the activities use
// (*genai.Models satisfies it).
type Generator interface {
	GenerateContent(ctx context.Context, model string, contents []*genai.Content, config *genai.GenerateContentConfig) (*genai.GenerateContentResponse, error)
}

// TranscriptStore keeps the model turns and tool results of every tool
// loop, by session (the workflow ID) and key. A key is written once: Put
// returns the entry the store holds, which an earlier attempt may have
// written (transcript.Store.Put).
type TranscriptStore interface {
	Put(ctx context.Context, session, key string, e transcript.Entry) (transcript.Entry, error)
	GetAll(ctx context.Context, session string, keys []string) ([]transcript.Entry, error)
}

// Model is the model side that the investigation's activities and the
// sub-agent's share: one Gemini call per activity attempt (the SDK's own
// retries are off; errors are mapped for Temporal's) and the transcript
// store that keeps each tool loop's turns.
type Model struct {
	LLM        Generator
	Name       string
	Transcript TranscriptStore
	// Calls records each call as a GenAI span and metrics (nil: not at all).
	Calls *telemetry.ModelCalls
}

// generate calls the model, classifying errors for Temporal's retries. An
// answer blocked on its way out (a candidate's SAFETY, RECITATION, ...)
// judged that sample, not the request, so it is sampled once more in the
// same attempt; a second block, a blocked prompt or an answer spent on
// thinking is a RefusedError that no retry repeats.
func (m *Model) generate(ctx context.Context, contents []*genai.Content, cfg *genai.GenerateContentConfig) (*genai.GenerateContentResponse, investigation.Usage, error) {
	resp, u, err := m.generateOnce(ctx, contents, cfg)
	if refused, ok := err.(*RefusedError); ok && refused.sampled() {
		var again investigation.Usage
		resp, again, err = m.generateOnce(ctx, contents, cfg)
		u = u.Add(again)
	}
	if _, ok := err.(*RefusedError); ok {
		err = geminiError(err)
	}
	return resp, u, err
}

// generateOnce calls the model once; a refusal is returned as a bare
// *RefusedError.
func (m *Model) generateOnce(ctx context.Context, contents []*genai.Content, cfg *genai.GenerateContentConfig) (*genai.GenerateContentResponse, investigation.Usage, error) {
	start := time.Now()
	ctx, call := m.Observe(ctx, telemetry.OpGenerateContent, m.Name)
	resp, err := CallGemini(ctx, func(ctx context.Context) (*genai.GenerateContentResponse, error) {
		return m.LLM.GenerateContent(ctx, m.Name, contents, cfg)
	})
	if err != nil {
		call.End(ctx, telemetry.Answer{}, err)
		Logger(ctx).Warn("model call failed", "model", m.Name, "ms", time.Since(start).Milliseconds(), "error", err)
		var unreadable *gemini.UnreadableError
		if errors.As(err, &unreadable) && unreadable.Usage != nil {
			// Answered and billed, though not readable: still counted.
			u := usageOf(m.Name, unreadable.Usage)
			billed(ctx, u)
			return nil, u, err
		}
		return nil, investigation.Usage{}, err
	}
	u := usageOf(m.Name, resp.UsageMetadata)
	call.End(ctx, answerOf(resp, u), nil)
	billed(ctx, u)
	Logger(ctx).Info("model call", "model", m.Name, "ms", time.Since(start).Milliseconds(),
		"prompt_tokens", u.PromptTokens, "output_tokens", u.OutputTokens, "thought_tokens", u.ThoughtTokens)
	if err := refusal(resp); err != nil {
		return nil, u, err
	}
	return resp, u, nil
}

// usageOf is the usage of one answered call of model.
func usageOf(model string, md *genai.GenerateContentResponseUsageMetadata) investigation.Usage {
	u := investigation.Usage{Calls: 1, Model: model}
	if md != nil {
		u.PromptTokens = int(md.PromptTokenCount)
		u.OutputTokens = int(md.CandidatesTokenCount)
		u.ThoughtTokens = int(md.ThoughtsTokenCount)
	}
	return u
}

// RefusedError is a billed answer with nothing usable in it, for a reason
// the same request meets again (a safety block, a blocked prompt, every
// output token spent on thinking): a retry would pay for the same refusal.
type RefusedError struct {
	// Reason is the finish or block reason Gemini gave.
	Reason string
	// Prompt says the prompt itself was blocked (promptFeedback).
	Prompt bool
}

// sampled says the block judged the sampled answer, which another sample
// may pass, rather than the prompt or the output budget.
func (e *RefusedError) sampled() bool {
	return !e.Prompt && e.Reason != string(genai.FinishReasonMaxTokens)
}

func (e *RefusedError) Error() string {
	switch {
	case e.Prompt:
		return "the model refused to answer (prompt blocked: " + e.Reason + ")"
	case e.Reason == string(genai.FinishReasonMaxTokens):
		return "the model spent its whole output budget thinking and gave no answer (MAX_TOKENS)"
	}
	return "the model refused to answer (" + e.Reason + ")"
}

// refusingReasons are the finish reasons that end an answer with nothing
// in it the same way for the same request. OTHER, STOP and a malformed
// function call are left to the retry: a new sample may well answer.
var refusingReasons = []genai.FinishReason{
	genai.FinishReasonSafety, genai.FinishReasonRecitation, genai.FinishReasonProhibitedContent,
	genai.FinishReasonBlocklist, genai.FinishReasonSPII, genai.FinishReasonImageSafety,
	genai.FinishReasonImageProhibitedContent, genai.FinishReasonImageRecitation,
	genai.FinishReasonLanguage, genai.FinishReasonMaxTokens,
}

// refusal returns a *RefusedError when resp answers nothing for a
// deterministic reason, else nil.
func refusal(resp *genai.GenerateContentResponse) error {
	if resp == nil {
		return nil
	}
	if len(resp.Candidates) == 0 || resp.Candidates[0] == nil {
		if pf := resp.PromptFeedback; pf != nil && pf.BlockReason != "" {
			return &RefusedError{Reason: string(pf.BlockReason), Prompt: true}
		}
		return nil
	}
	c := resp.Candidates[0]
	if hasAnswer(c) || !slices.Contains(refusingReasons, c.FinishReason) {
		return nil
	}
	return &RefusedError{Reason: string(c.FinishReason)}
}

// hasAnswer says a candidate holds text (not only white space) or a
// function call beside its thoughts.
func hasAnswer(c *genai.Candidate) bool {
	if c == nil || c.Content == nil {
		return false
	}
	for _, p := range c.Content.Parts {
		if p != nil && !p.Thought && (strings.TrimSpace(p.Text) != "" || p.FunctionCall != nil) {
			return true
		}
	}
	return false
}

// Observe starts recording a model call of operation op to model, made by
// the running activity; m may be nil.
func (m *Model) Observe(ctx context.Context, op, model string) (context.Context, *telemetry.ModelCall) {
	if m == nil {
		return ctx, nil
	}
	name := ""
	if activity.IsActivity(ctx) {
		name = activity.GetInfo(ctx).ActivityType.Name
	}
	return m.Calls.Start(ctx, op, model, name)
}

// answerOf is what telemetry records of an answer: never its content.
func answerOf(resp *genai.GenerateContentResponse, u investigation.Usage) telemetry.Answer {
	a := telemetry.Answer{ResponseModel: resp.ModelVersion, ResponseID: resp.ResponseID, Usage: u}
	for _, c := range resp.Candidates {
		if c != nil {
			a.FinishReasons = append(a.FinishReasons, string(c.FinishReason))
		}
	}
	return a
}

// GenerateJSON asks for structured output (a system instruction, one user
// text, a response schema) and decodes it into out. When the answer does
// not decode or check refuses it, the model is asked once more with the
// problem named; a second failure is a non-retryable error.
func (m *Model) GenerateJSON(ctx context.Context, what, system, user string, schema *genai.Schema, out any, check func() error) (investigation.Usage, error) {
	cfg := &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText(system, genai.RoleUser),
		ResponseMIMEType:  "application/json",
		ResponseSchema:    schema,
	}
	contents := []*genai.Content{genai.NewContentFromText(user, genai.RoleUser)}
	total := earlierAttempts(ctx)
	var problem error
	for attempt := 1; attempt <= 2; attempt++ {
		callCtx, cancel := callWindow(ctx, 3-attempt)
		resp, u, err := m.generate(callCtx, contents, cfg)
		cancel()
		total = total.Add(u)
		if err != nil {
			return total, err
		}
		text := answerText(resp)
		if problem = decodeJSON(text, out); problem == nil {
			if problem = check(); problem == nil || attempt == 2 && errors.As(problem, new(correctable)) {
				return total, nil
			}
		}
		contents = append(contents,
			genai.NewContentFromText(text, genai.RoleModel),
			// The problem may repeat what the model wrote: one quoted line, like the analyst's words.
			genai.NewContentFromText("That answer cannot be used: "+prompt.Quote(problem.Error())+". Answer again with JSON only, matching the schema.", genai.RoleUser))
	}
	return total, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("the model's %s answer was unusable twice: %v", what, problem), ErrMalformedOutput, problem)
}

// callMargin is what an attempt keeps after its last model call: time to
// report the result before the attempt's deadline.
const callMargin = 5 * time.Second

// callWindow bounds a model call to its share of the attempt's time left,
// calls being it and those that may follow (GenerateJSON's re-ask), so a
// re-ask does not time out the attempt and have the retry pay for the
// first call again (llmOptions' attempt holds two HTTP timeouts). A call
// still gets up to the HTTP timeout when the attempt has it: a smaller
// share would time out a slow answer on every attempt alike, and only a
// rare re-ask then finds too little time left (a best-effort attempt).
func callWindow(ctx context.Context, calls int) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || calls < 1 {
		return context.WithCancel(ctx)
	}
	left := max(time.Until(deadline)-callMargin, 0)
	return context.WithTimeout(ctx, max(left/time.Duration(calls), min(left, gemini.DefaultTimeout)))
}

// correctable is a problem of a structured answer that the model is asked
// once to fix; when its second answer still has it, GenerateJSON keeps that
// answer and the caller repairs it in code (a conclusion drops the evidence
// that does not check out).
type correctable struct{ error }

// decodeJSON reads a JSON object from model text, tolerating a Markdown
// fence, into out (a pointer), which it zeroes first: a second answer
// never keeps a field of the first.
func decodeJSON(text string, out any) error {
	if v := reflect.ValueOf(out); v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().SetZero()
	}
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
	c := firstCandidate(resp)
	if c == nil || c.Content == nil {
		return ""
	}
	return contentText(c.Content)
}

// firstCandidate is resp's first candidate; nil when there is none or the
// body held a null one ("candidates":[null]).
func firstCandidate(resp *genai.GenerateContentResponse) *genai.Candidate {
	if resp == nil || len(resp.Candidates) == 0 {
		return nil
	}
	return resp.Candidates[0]
}

// ErrNoAnswer is the Temporal error type of a model turn whose answer held
// nothing usable.
const ErrNoAnswer = "ModelNoAnswer"

// maxNoAnswerAttempts bounds the attempts of a turn whose answers hold
// nothing usable: each is billed, and a model that answers nothing three
// times running is not answering this prompt.
const maxNoAnswerAttempts = 3

// noAnswer is the error of a turn answered with nothing usable: retried,
// except on the activity's maxNoAnswerAttempts-th attempt.
func noAnswer(ctx context.Context, key string, resp *genai.GenerateContentResponse) error {
	attempt := int32(1)
	if activity.IsActivity(ctx) {
		attempt = activity.GetInfo(ctx).Attempt
	}
	return noAnswerAt(attempt, key, finishReason(resp))
}

func noAnswerAt(attempt int32, key, reason string) error {
	msg := fmt.Sprintf("the model returned no usable content for %s (finish reason %s)", key, reason)
	if attempt >= maxNoAnswerAttempts {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s, %d times", msg, attempt), ErrNoAnswer, nil)
	}
	return temporal.NewApplicationError(msg, ErrNoAnswer)
}

// Turn runs one model turn of a tool loop with the given system prompt,
// conversation and function declarations, stores the model's content under
// key and returns its text and calls. The final turn may not call tools.
func (m *Model) Turn(ctx context.Context, session, key, system string, contents []*genai.Content, decls []*genai.FunctionDeclaration, final bool) (TurnOutput, error) {
	earlier := earlierAttempts(ctx)
	if isRetry(ctx) {
		// An earlier attempt may have stored its answer before it failed:
		// that answer was paid for, so it is the turn, without a new call.
		if stored, err := m.Transcript.GetAll(ctx, session, []string{key}); err == nil {
			Logger(ctx).Info("model turn answered from the stored answer of an earlier attempt", "key", key)
			return storedTurn(key, stored[0], earlier)
		} else if !errors.As(err, new(*transcript.MissingError)) {
			return TurnOutput{}, storeError(err)
		}
	}
	cfg := &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText(system, genai.RoleUser)}
	if len(decls) > 0 {
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
		if final {
			cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeNone}}
		}
	}
	resp, usage, err := m.generate(ctx, contents, cfg)
	if err != nil {
		return TurnOutput{}, err
	}
	usage = usage.Add(earlier)
	c := firstCandidate(resp)
	if c == nil || !hasAnswer(c) || c.FinishReason == genai.FinishReasonMalformedFunctionCall {
		// Nothing usable (no candidate, empty or thought-only parts, a
		// signature alone, or a call the API could not parse beside some
		// text): never stored as the step's answer. Generate did not find
		// it refused (OTHER, an empty STOP), and a new sample usually
		// answers: retried, a bounded number of times.
		return TurnOutput{}, noAnswer(ctx, key, resp)
	}
	content := c.Content
	content.Role = genai.RoleModel
	clipAnswer(content, maxAnswerText)
	out := TurnOutput{Key: key, Text: answerText(resp), Usage: usage}
	for _, fc := range resp.FunctionCalls() {
		out.Calls = append(out.Calls, toolcall.Call{ID: fc.ID, Name: fc.Name, Args: fc.Args})
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return TurnOutput{}, fmt.Errorf("encode model content: %w", err)
	}
	if len(raw) > maxStoredAnswer {
		// Only function call arguments can still be this large: the same
		// answer would be bought again on every retry, so none is made.
		return TurnOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the model's answer is too large to store (%d KiB, at most %d KiB)", len(raw)>>10, maxStoredAnswer>>10), ErrAnswerTooLarge, nil)
	}
	// Text is kept beside Content (at most maxAnswerText more): a worker of
	// the previous build, still serving this session in a rolling deploy,
	// reads the answer from Text only.
	stored, err := m.Transcript.Put(ctx, session, key, transcript.Entry{Kind: transcript.KindModel, Content: string(raw), Text: out.Text})
	if err != nil {
		return TurnOutput{}, storeError(err)
	}
	if stored.Content != string(raw) {
		// An earlier attempt of this turn stored its answer first: that is
		// the turn the transcript holds, so it is the one returned.
		return storedTurn(key, stored, usage)
	}
	return out, nil
}

// Bounds of a stored model answer. A Firestore document holds at most
// 1 MiB, and a write refused for its size would be retried, and the answer
// bought again, on every attempt: the text is clipped (the answer was paid
// for and its start still serves the step) and what is still too large
// fails for good. No MaxOutputTokens is set: on Gemini 2.5 it counts the
// thoughts too, so a cap low enough to matter would turn long thinking
// into MAX_TOKENS refusals; the model's own output maximum bounds the cost.
const (
	maxAnswerText   = 128 << 10
	maxStoredAnswer = 850 << 10 // with Text beside it, under 1 MiB
)

// clipAnswer clips the text parts of content, in order, to n bytes in all;
// the clip note says how much was left out.
func clipAnswer(content *genai.Content, n int) {
	for _, p := range content.Parts {
		if p == nil || p.Text == "" {
			continue
		}
		p.Text = clip.String(p.Text, max(n, 0))
		n -= len(p.Text)
	}
}

// entryText is the answer text of a stored entry: Text, or for a model
// entry stored without it (by a build that kept it in Content only), the
// text of its Content.
func entryText(e transcript.Entry) string {
	if e.Text != "" || e.Kind != transcript.KindModel {
		return e.Text
	}
	var c genai.Content
	if err := json.Unmarshal([]byte(e.Content), &c); err != nil {
		return ""
	}
	return contentText(&c)
}

// contentText is the non-thought text of a model content.
func contentText(c *genai.Content) string {
	var b strings.Builder
	for _, p := range c.Parts {
		if p != nil && !p.Thought && p.Text != "" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// storedTurn rebuilds a turn's output from its stored entry.
func storedTurn(key string, e transcript.Entry, usage investigation.Usage) (TurnOutput, error) {
	var c genai.Content
	if err := json.Unmarshal([]byte(e.Content), &c); err != nil {
		return TurnOutput{}, fmt.Errorf("decode stored model turn %s: %w", key, err)
	}
	out := TurnOutput{Key: key, Text: contentText(&c), Usage: usage}
	for _, p := range c.Parts {
		if p != nil && p.FunctionCall != nil {
			out.Calls = append(out.Calls, toolcall.Call{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: p.FunctionCall.Args})
		}
	}
	return out, nil
}

// Contents rebuilds a tool loop's conversation: the opening user text, then each
// model turn followed by one content holding all of that turn's function
// responses, in call order.
func (m *Model) Contents(ctx context.Context, session, opening string, refs []Ref) ([]*genai.Content, error) {
	contents := []*genai.Content{genai.NewContentFromText(opening, genai.RoleUser)}
	var keys []string
	for _, r := range refs {
		if r.Key != "" {
			keys = append(keys, r.Key)
		}
	}
	entries, err := m.Transcript.GetAll(ctx, session, keys)
	if err != nil {
		return nil, storeError(err)
	}
	var responses *genai.Content
	flush := func() {
		if responses != nil {
			contents = append(contents, responses)
			responses = nil
		}
	}
	addResponse := func(p *genai.Part) {
		if responses == nil {
			responses = &genai.Content{Role: genai.RoleUser}
		}
		responses.Parts = append(responses.Parts, p)
	}
	next := 0
	for _, r := range refs {
		if r.Key == "" {
			// A failed call's error, or a result the workflow wrote
			// (Inline) as it is: an empty "error" beside it reads as a failure.
			resp := map[string]any{"error": r.Error}
			if r.Inline != "" {
				resp = map[string]any{}
				if err := json.Unmarshal([]byte(r.Inline), &resp); err != nil {
					return nil, fmt.Errorf("decode the inline result of %s: %w", r.CallID, err)
				}
				if _, ok := resp["error"]; !ok && r.Error != "" {
					resp["error"] = r.Error
				}
			}
			addResponse(&genai.Part{FunctionResponse: &genai.FunctionResponse{ID: r.CallID, Name: r.Tool, Response: resp}})
			continue
		}
		e := entries[next]
		next++
		switch e.Kind {
		case transcript.KindModel:
			flush()
			var c genai.Content
			if err := json.Unmarshal([]byte(e.Content), &c); err != nil {
				return nil, fmt.Errorf("decode stored model turn %s: %w", r.Key, err)
			}
			contents = append(contents, &c)
		case transcript.KindTool:
			var resp map[string]any
			if err := json.Unmarshal([]byte(e.Response), &resp); err != nil {
				return nil, fmt.Errorf("decode stored tool result %s: %w", r.Key, err)
			}
			id, name := e.CallID, e.Tool
			if r.CallID != "" { // a reused result answers this turn's call
				id, name = r.CallID, r.Tool
			}
			addResponse(&genai.Part{FunctionResponse: &genai.FunctionResponse{ID: id, Name: name, Response: resp}})
		default:
			return nil, fmt.Errorf("transcript entry %s has unknown kind %q", r.Key, e.Kind)
		}
	}
	flush()
	return contents, nil
}

// finishReason names why the model stopped, for error text.
func finishReason(resp *genai.GenerateContentResponse) string {
	c := firstCandidate(resp)
	if c == nil || c.FinishReason == "" {
		return "none"
	}
	return string(c.FinishReason)
}

// lostAnswer stands in for a step's answer the transcript store no longer
// holds: the prompt says so rather than failing the phase.
const lostAnswer = "(this answer is no longer in the transcript store)"

// answers reads the stored answers (model text) under keys, in order; an
// answer the store lost reads as lostAnswer.
func (m *Model) answers(ctx context.Context, session string, keys []string) ([]string, error) {
	entries, err := m.getEach(ctx, session, keys)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(keys))
	for i, e := range entries {
		out[i] = lostAnswer
		if e != nil {
			out[i] = entryText(*e)
		}
	}
	return out, nil
}

// getEach reads the entries under keys, in order, with nil for an entry the
// store lost.
func (m *Model) getEach(ctx context.Context, session string, keys []string) ([]*transcript.Entry, error) {
	entries, err := m.Transcript.GetAll(ctx, session, keys)
	var missing *transcript.MissingError
	if err != nil && !errors.As(err, &missing) {
		return nil, err
	}
	out := make([]*transcript.Entry, len(keys))
	if err == nil {
		for i := range entries {
			out[i] = &entries[i]
		}
		return out, nil
	}
	for i, k := range keys { // some are lost: read them one by one
		e, err := m.Transcript.GetAll(ctx, session, []string{k})
		switch {
		case errors.As(err, &missing):
		case err != nil:
			return nil, err
		default:
			out[i] = &e[0]
		}
	}
	return out, nil
}
