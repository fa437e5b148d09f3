package activities

import (
	"context"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
)

// ModelTurn runs one model turn of a step's tool loop (or of the loop that
// answers a follow-up directly). The system instruction holds the role, the
// analyst's guidance and how to work; the first user content holds the
// alert, the results of the earlier steps it builds on (each in a data
// block, loaded by key) and the step with the objective, as the planner
// wrote them (a data block); then come this step's own turns and tool
// results. A direct answer is given the conversation and the standing
// verdict instead of a step. A step planned with no tools gets no function
// declarations; every other step may also ask the analyst and read the
// whole alert.
func (a *Activities) ModelTurn(ctx context.Context, in TurnInput) (TurnOutput, error) {
	if err := a.withContext(ctx, in.Session, in.Context, in.UseContext); err != nil {
		return TurnOutput{}, err
	}
	al, err := a.loadAlert(ctx, in.AlertID)
	if err != nil {
		return TurnOutput{}, err
	}
	tag := prompt.NewTag()
	alert, err := alertSection(tag, al)
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
	p, err := renderPhase(tag, phase, map[string]any{
		"Alert":       alert,
		"Earlier":     earlier,
		"Step":        in.Step,
		"StepText":    stepText(in.Objective, in.Step),
		"StepHeading": prompt.StepHeading,
		"Final":       in.Final,
		"Hints":       in.Hints,
		"Arrivals":    arrivalsSection(in.Arrivals), // arrivals.go
		"NoTools":     !in.Direct && len(in.Step.Tools) == 0,
		"RefIDArg":    toolcall.RefIDArg,
		"RefPrefix":   toolcall.RefPrefix,
		"Question":    in.Question,
		"Asker":       string(in.Asker),
		"History":     conversationText(in.History),
		"Language":    languageName(in.Language),
		"Lang":        in.Language,
		"Standing":    in.Standing,
		"SourceRules": sourceRules(a.Tools),
	})
	if err != nil {
		return TurnOutput{}, err
	}
	contents, err := a.Model.Contents(ctx, in.Session, p.user, in.Transcript)
	if err != nil {
		return TurnOutput{}, err
	}
	decls, err := a.stepDeclarations(in)
	if err != nil {
		return TurnOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "BadDeclaration", nil)
	}
	return a.Model.Turn(ctx, in.Session, in.Key, p.system, contents, decls, in.Final)
}

// stepDeclarations are the function declarations a step's model turns get:
// the step's tools plus ask_user and get_alert, none for a step planned
// without tools, and every tool for a direct answer.
// An outside (MCP) tool is declared from the declaration the plan recorded
// (in.Declared), never from the server's current list.
func (a *Activities) stepDeclarations(in TurnInput) ([]*genai.FunctionDeclaration, error) {
	var names []string
	switch {
	case in.Direct:
		names = a.Tools.Names()
	case len(in.Step.Tools) == 0:
		return nil, nil
	default:
		names = slices.Clone(in.Step.Tools)
		for _, always := range []string{toolcall.AskUser, toolcall.GetAlert} {
			if !slices.Contains(names, always) {
				names = append(names, always)
			}
		}
	}
	var builtin []string
	var out []*genai.FunctionDeclaration
	for _, n := range names {
		if strings.Contains(n, ".") {
			continue // an MCP tool: only as recorded
		}
		builtin = append(builtin, n)
	}
	out = a.Tools.Declarations(builtin)
	for _, t := range in.Declared {
		if t.Declared == nil || (!in.Direct && !slices.Contains(names, t.Name)) {
			continue
		}
		d, err := tools.Recorded(t.Name, *t.Declared)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// languageName names a conclusion language code for a prompt.
func languageName(code string) string {
	if name := investigation.Languages[code]; name != "" {
		return name
	}
	return investigation.Languages["en"]
}

// stepText is the step to execute as the planner wrote it, for a data
// block.
func stepText(objective string, s plan.Step) string {
	return "Objective of the investigation: " + objective + "\nStep " + s.ID + ": " + s.Description + "\nExpected outcome: " + s.Expected
}

type earlierResult struct{ StepID, Text string }

// earlierResults loads the answers of the earlier steps the current one
// sees (stepHost.earlier), each headed by what the step was asked.
func (a *Activities) earlierResults(ctx context.Context, in TurnInput) ([]earlierResult, error) {
	keys := make([]string, len(in.Earlier))
	for i, e := range in.Earlier {
		keys[i] = e.Key
	}
	texts, err := a.Model.answers(ctx, in.Session, keys)
	if err != nil {
		return nil, err
	}
	out := make([]earlierResult, len(texts))
	for i, text := range texts {
		out[i] = earlierResult{StepID: in.Earlier[i].StepID, Text: "Asked: " + in.Earlier[i].Description + "\n\n" + clip.String(text, maxResultInPrompt)}
	}
	return out, nil
}
