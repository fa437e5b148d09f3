package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/transcript"
)

// ModelTurn runs one model turn of a step's tool loop. The model sees the
// step, the alert, the results of earlier steps and this step's transcript,
// all loaded from stores by key; its answer is stored under in.Key and
// returned (text and function calls) to the workflow.
func (a *Activities) ModelTurn(ctx context.Context, in investigation.TurnInput) (investigation.TurnOutput, error) {
	al, err := a.loadAlert(ctx, in.AlertID)
	if err != nil {
		return investigation.TurnOutput{}, err
	}
	earlier, err := a.earlierResults(ctx, in)
	if err != nil {
		return investigation.TurnOutput{}, err
	}
	system, err := render("execute", map[string]any{
		"Objective": in.Objective,
		"AlertID":   al.ID,
		"AlertType": al.Type,
		"Alert":     alerts.Describe(al, alertFields),
		"Earlier":   earlier,
		"Final":     in.Final,
		"Hints":     in.Hints,
		"History":   in.History,
	})
	if err != nil {
		return investigation.TurnOutput{}, err
	}
	request := "Execute this step: " + in.Step.Description
	if in.Step.Expected != "" {
		request += "\nExpected outcome: " + in.Step.Expected
	}
	contents, err := a.contents(ctx, in.Session, request, in.Transcript)
	if err != nil {
		return investigation.TurnOutput{}, err
	}
	decls := a.Tools.Declarations(in.Step.Tools)
	if len(in.Step.Tools) > 0 && !slices.Contains(in.Step.Tools, investigation.AskUserTool) {
		// The analyst can always be asked.
		decls = append(decls, a.Tools.Declarations([]string{investigation.AskUserTool})...)
	}
	return a.turn(ctx, in.Session, in.Key, system, contents, decls, in.Final)
}

// turn runs one model turn of a tool loop with the given system prompt,
// conversation and function declarations, stores the model's content under
// key and returns its text and calls. The final turn may not call tools.
func (a *Activities) turn(ctx context.Context, session, key, system string, contents []*genai.Content, decls []*genai.FunctionDeclaration, final bool) (investigation.TurnOutput, error) {
	cfg := &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText(system, genai.RoleUser)}
	if len(decls) > 0 {
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
		if final {
			cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeNone}}
		}
	}
	resp, usage, err := a.generate(ctx, contents, cfg)
	if err != nil {
		return investigation.TurnOutput{}, err
	}
	if len(resp.Candidates) == 0 || resp.Candidates[0].Content == nil || len(resp.Candidates[0].Content.Parts) == 0 {
		// Retryable: an empty candidate (a blocked or cut answer) is usually
		// followed by a normal one.
		return investigation.TurnOutput{}, fmt.Errorf("the model returned no content for %s (finish reason %s)", key, finishReason(resp))
	}
	content := resp.Candidates[0].Content
	content.Role = genai.RoleModel
	out := investigation.TurnOutput{Key: key, Text: answerText(resp), Usage: usage}
	for _, fc := range resp.FunctionCalls() {
		out.Calls = append(out.Calls, investigation.ToolCall{ID: fc.ID, Name: fc.Name, Args: fc.Args})
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return investigation.TurnOutput{}, fmt.Errorf("encode model content: %w", err)
	}
	if err := a.Transcript.Put(ctx, session, key, transcript.Entry{Kind: transcript.KindModel, Content: string(raw), Text: out.Text}); err != nil {
		return investigation.TurnOutput{}, err
	}
	return out, nil
}

type earlierResult struct{ StepID, Description, Result string }

func (a *Activities) earlierResults(ctx context.Context, in investigation.TurnInput) ([]earlierResult, error) {
	keys := make([]string, len(in.Earlier))
	for i, e := range in.Earlier {
		keys[i] = e.Key
	}
	entries, err := a.Transcript.GetAll(ctx, in.Session, keys)
	if err != nil {
		return nil, err
	}
	out := make([]earlierResult, len(entries))
	for i, e := range entries {
		out[i] = earlierResult{StepID: in.Earlier[i].StepID, Description: in.Earlier[i].Description, Result: e.Text}
	}
	return out, nil
}

// contents rebuilds a tool loop's conversation: the request, then each
// model turn followed by one content holding all of that turn's function
// responses, in call order.
func (a *Activities) contents(ctx context.Context, session, request string, refs []investigation.Ref) ([]*genai.Content, error) {
	contents := []*genai.Content{genai.NewContentFromText(request, genai.RoleUser)}
	var keys []string
	for _, r := range refs {
		if r.Key != "" {
			keys = append(keys, r.Key)
		}
	}
	entries, err := a.Transcript.GetAll(ctx, session, keys)
	if err != nil {
		return nil, err
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
			resp := map[string]any{"error": r.Error}
			if r.Inline != "" {
				if err := json.Unmarshal([]byte(r.Inline), &resp); err != nil {
					return nil, fmt.Errorf("decode the inline result of %s: %w", r.CallID, err)
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
