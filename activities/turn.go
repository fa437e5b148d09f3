package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/transcript"
)

// ModelTurn runs one model turn of a step's tool loop (or of the loop that
// answers a follow-up directly). The system instruction holds the role, the
// objective, the analyst's guidance and how to work; the first user content
// holds the alert, the results of earlier steps of this exchange (each in a
// data block, loaded by key) and the step; then come this step's own turns
// and tool results. A step planned with no tools gets no function
// declarations; every other step may also ask the analyst and read the
// whole alert.
func (a *Activities) ModelTurn(ctx context.Context, in TurnInput) (TurnOutput, error) {
	al, err := a.loadAlert(ctx, in.AlertID)
	if err != nil {
		return TurnOutput{}, err
	}
	alert, err := alertSection(al)
	if err != nil {
		return TurnOutput{}, err
	}
	earlier, err := a.earlierResults(ctx, in)
	if err != nil {
		return TurnOutput{}, err
	}
	phase := "execute"
	if in.Direct {
		phase = "answer"
	}
	p, err := renderPhase(phase, map[string]any{
		"Objective": in.Objective,
		"Alert":     alert,
		"Earlier":   earlier,
		"Step":      in.Step,
		"Final":     in.Final,
		"Hints":     in.Hints,
		"NoTools":   !in.Direct && len(in.Step.Tools) == 0,
		"RefIDArg":  toolcall.RefIDArg,
		"RefPrefix": toolcall.RefPrefix,
		"Question":  in.Question,
		"History":   conversationText(in.History),
		"Language":  languageName(in.Language),
	})
	if err != nil {
		return TurnOutput{}, err
	}
	contents, err := a.contents(ctx, in.Session, p.user, in.Transcript)
	if err != nil {
		return TurnOutput{}, err
	}
	return a.turn(ctx, in.Session, in.Key, p.system, contents, a.stepDeclarations(in), in.Final)
}

// stepDeclarations are the function declarations a step's model turns get:
// the step's tools plus ask_user and get_alert, none for a step planned
// without tools, and every tool for a direct answer.
func (a *Activities) stepDeclarations(in TurnInput) []*genai.FunctionDeclaration {
	switch {
	case in.Direct:
		return a.Tools.Declarations(a.Tools.Names())
	case len(in.Step.Tools) == 0:
		return nil
	}
	names := slices.Clone(in.Step.Tools)
	for _, always := range []string{toolcall.AskUser, toolcall.GetAlert} {
		if !slices.Contains(names, always) {
			names = append(names, always)
		}
	}
	return a.Tools.Declarations(names)
}

// languageName names a conclusion language code for a prompt.
func languageName(code string) string {
	if name := investigation.Languages[code]; name != "" {
		return name
	}
	return investigation.Languages["en"]
}

// turn runs one model turn of a tool loop with the given system prompt,
// conversation and function declarations, stores the model's content under
// key and returns its text and calls. The final turn may not call tools.
func (a *Activities) turn(ctx context.Context, session, key, system string, contents []*genai.Content, decls []*genai.FunctionDeclaration, final bool) (TurnOutput, error) {
	cfg := &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText(system, genai.RoleUser)}
	if len(decls) > 0 {
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
		if final {
			cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeNone}}
		}
	}
	resp, usage, err := a.generate(ctx, contents, cfg)
	if err != nil {
		return TurnOutput{}, err
	}
	if len(resp.Candidates) == 0 || resp.Candidates[0].Content == nil || len(resp.Candidates[0].Content.Parts) == 0 {
		// Retryable: an empty candidate (a blocked or cut answer) is usually
		// followed by a normal one.
		return TurnOutput{}, fmt.Errorf("the model returned no content for %s (finish reason %s)", key, finishReason(resp))
	}
	content := resp.Candidates[0].Content
	content.Role = genai.RoleModel
	out := TurnOutput{Key: key, Text: answerText(resp), Usage: usage}
	for _, fc := range resp.FunctionCalls() {
		out.Calls = append(out.Calls, toolcall.Call{ID: fc.ID, Name: fc.Name, Args: fc.Args})
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return TurnOutput{}, fmt.Errorf("encode model content: %w", err)
	}
	if err := a.Transcript.Put(ctx, session, key, transcript.Entry{Kind: transcript.KindModel, Content: string(raw), Text: out.Text}); err != nil {
		return TurnOutput{}, err
	}
	return out, nil
}

type earlierResult struct{ StepID, Description, Text string }

// earlierResults loads the answers of the steps this exchange finished
// before the current one.
func (a *Activities) earlierResults(ctx context.Context, in TurnInput) ([]earlierResult, error) {
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
		out[i] = earlierResult{StepID: in.Earlier[i].StepID, Description: in.Earlier[i].Description, Text: clip.String(e.Text, maxResultInPrompt)}
	}
	return out, nil
}

// contents rebuilds a tool loop's conversation: the opening user text, then each
// model turn followed by one content holding all of that turn's function
// responses, in call order.
func (a *Activities) contents(ctx context.Context, session, opening string, refs []Ref) ([]*genai.Content, error) {
	contents := []*genai.Content{genai.NewContentFromText(opening, genai.RoleUser)}
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
