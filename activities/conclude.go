package activities

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/investigation"
)

// Conclude writes the Markdown conclusion from the objective, the steps with
// their status and results, and the insights (not the conversation).
func (a *Activities) Conclude(ctx context.Context, in investigation.ConcludeInput) (investigation.Conclusion, error) {
	al, err := a.loadAlert(ctx, in.AlertID)
	if err != nil {
		return investigation.Conclusion{}, err
	}
	lang := investigation.Languages[in.Language]
	if lang == "" {
		lang = investigation.Languages["en"]
	}
	prompt, err := render("conclude", map[string]any{
		"Request":    in.Request,
		"Objective":  in.Objective,
		"Alert":      alerts.Describe(al, 20),
		"Steps":      in.Steps,
		"Insights":   in.Insights,
		"Language":   lang,
		"EndedEarly": in.EndedEarly,
		"Hints":      in.Hints,
	})
	if err != nil {
		return investigation.Conclusion{}, err
	}
	resp, usage, err := a.generate(ctx, []*genai.Content{genai.NewContentFromText(prompt, genai.RoleUser)}, nil)
	if err != nil {
		return investigation.Conclusion{}, err
	}
	text := strings.TrimSpace(answerText(resp))
	if text == "" {
		// Retryable: another attempt usually produces text.
		return investigation.Conclusion{}, fmt.Errorf("the model returned an empty conclusion (finish reason %s)", finishReason(resp))
	}
	return investigation.Conclusion{Markdown: text, Usage: usage}, nil
}

func finishReason(resp *genai.GenerateContentResponse) string {
	if resp == nil || len(resp.Candidates) == 0 {
		return "none"
	}
	return string(resp.Candidates[0].FinishReason)
}
