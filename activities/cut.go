package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/transcript"
)

// CutAnswerInput asks for the answer of a tool loop that must answer now
// (the analyst stopped the investigation): made in code from what the loop
// has, without a model call.
type CutAnswerInput struct {
	Session string `json:"session"`
	// Key is where the answer is stored.
	Key string `json:"key"`
	// Transcript is the loop's transcript so far: its model turns and the
	// results of its calls.
	Transcript []Ref `json:"transcript,omitempty"`
	// Reason says why the loop was cut short.
	Reason string `json:"reason"`
	// MaxBytes bounds the answer.
	MaxBytes int `json:"max_bytes"`
	// Language is the analyst's (investigation.Languages; empty: English),
	// which the answer's own words follow.
	Language string `json:"language,omitempty"`
}

// Bounds of a cut answer: its notes, and each result at least (results
// share what is left evenly).
const (
	maxCutNotes     = 2 << 10
	minCutResult    = 512
	defaultCutBytes = 16 << 10
)

// CutAnswer writes the answer of a tool loop cut short from what it had: the
// model's last text and the results of the calls that ran, each cut to an
// even share of MaxBytes, under a line saying that code, not the model,
// wrote it and why. It stores the answer under Key (a model entry, so every
// reader of answers takes it as one) and returns it; an entry the store
// lost is named as lost. A retry returns the stored answer.
func (a *Activities) CutAnswer(ctx context.Context, in CutAnswerInput) (TurnOutput, error) {
	keys := make([]string, 0, len(in.Transcript))
	for _, r := range in.Transcript {
		if r.Key != "" {
			keys = append(keys, r.Key)
		}
	}
	entries, err := a.Model.getEach(ctx, in.Session, keys)
	if err != nil {
		return TurnOutput{}, storeError(err)
	}
	text := cutAnswerText(in, entries)
	content, err := json.Marshal(genai.NewContentFromText(text, genai.RoleModel))
	if err != nil {
		return TurnOutput{}, fmt.Errorf("encode the cut answer: %w", err)
	}
	stored, err := a.Model.Transcript.Put(ctx, in.Session, in.Key, transcript.Entry{Kind: transcript.KindModel, Content: string(content), Text: text})
	if err != nil {
		return TurnOutput{}, storeError(err)
	}
	return TurnOutput{Key: in.Key, Text: entryText(stored)}, nil
}

// cutAnswerText lays out what a loop had; entries are those of the
// transcript's keyed refs, in order (nil for one the store lost).
func cutAnswerText(in CutAnswerInput, entries []*transcript.Entry) string {
	limit := in.MaxBytes
	if limit <= 0 {
		limit = defaultCutBytes
	}
	var notes string
	type result struct{ head, body string }
	var results []result
	next := 0
	for _, r := range in.Transcript {
		if r.Key == "" {
			body := r.Inline
			if body == "" {
				body = "error: " + r.Error
			}
			results = append(results, result{r.Tool + " (" + r.CallID + ")", body})
			continue
		}
		e := entries[next]
		next++
		switch {
		case e == nil:
			results = append(results, result{r.Key, lostAnswer})
		case e.Kind == transcript.KindModel:
			if t := strings.TrimSpace(entryText(*e)); t != "" {
				notes = t
			}
		default:
			id, tool := e.CallID, e.Tool
			if r.CallID != "" { // a reused result
				id, tool = r.CallID, r.Tool
			}
			results = append(results, result{tool + " (" + id + ")", e.Response})
		}
	}
	var b strings.Builder
	say := notesIn(in.Language)
	fmt.Fprintf(&b, say.cutAnswer+"\n", cutReasonIn(in.Language, in.Reason))
	if notes != "" {
		b.WriteString("\n" + say.lastNotes + "\n" + clip.String(notes, maxCutNotes) + "\n")
	}
	if len(results) == 0 {
		b.WriteString("\n" + say.noResults + "\n")
	} else {
		b.WriteString("\n" + say.toolResults + "\n")
		share := max((limit-b.Len())/len(results)-64, minCutResult)
		for _, r := range results {
			b.WriteString("- " + r.head + ":\n" + clip.String(r.body, share) + "\n")
		}
	}
	return clip.String(b.String(), limit)
}
