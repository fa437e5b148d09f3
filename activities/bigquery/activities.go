package bigquery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/telemetry"
	"github.com/secops-agent/investigator/tools"
	"github.com/secops-agent/investigator/transcript"
)

// Embedder is the embedding part of the genai client (*genai.Models).
type Embedder interface {
	EmbedContent(ctx context.Context, model string, contents []*genai.Content, config *genai.EmbedContentConfig) (*genai.EmbedContentResponse, error)
}

// MemoryStore is what the sub-agent needs from the Firestore memory store
// (memory.Store).
type MemoryStore interface {
	Recall(ctx context.Context, embedding []float32, minSimilarity float64, limit int) ([]memory.Memory, error)
	Propose(ctx context.Context, id string, c memory.Claim, queryText string, embedding []float32, status memory.Status) (memory.Memory, bool, error)
	Adjust(ctx context.Context, voter string, helpful, harmful []string) ([]string, error)
}

// Activities are the sub-agent's activities; the worker registers one value
// of it, next to the investigation's.
type Activities struct {
	Model *activities.Model
	// Tools are the sub-agent's BigQuery tools; the investigation's
	// CallTool runs them as the Toolset toolset.
	Tools          *tools.Registry
	Embedder       Embedder
	EmbeddingModel string
	Memories       MemoryStore
	// MinSimilarity and RecallLimit bound memory recall.
	MinSimilarity float64
	RecallLimit   int
	// Tables are the tables the sub-agent may query: a learned claim must
	// be about one of them.
	Tables []string
	// AutoApprove stores learned claims approved, so that later sessions
	// recall them without a person's review (--auto-approve-memories).
	AutoApprove bool
}

// embed returns one 768-dimension embedding per text, and the usage the
// activity reports: this call's with its earlier attempts'.
func (a *Activities) embed(ctx context.Context, task string, texts ...string) ([][]float32, investigation.Usage, error) {
	contents := make([]*genai.Content, len(texts))
	for i, t := range texts {
		contents[i] = genai.NewContentFromText(t, genai.RoleUser)
	}
	dims := int32(memory.Dimensions)
	ctx, call := a.Model.Observe(ctx, telemetry.OpEmbeddings, a.EmbeddingModel)
	resp, err := activities.CallGemini(ctx, func(ctx context.Context) (*genai.EmbedContentResponse, error) {
		return a.Embedder.EmbedContent(ctx, a.EmbeddingModel, contents, &genai.EmbedContentConfig{TaskType: task, OutputDimensionality: &dims})
	})
	if err != nil {
		call.End(ctx, telemetry.Answer{}, err)
		return nil, investigation.Usage{}, err
	}
	u := embedUsage(a.EmbeddingModel, resp, texts)
	call.End(ctx, telemetry.Answer{Usage: u}, nil)
	u = activities.Billed(ctx, u)
	if len(resp.Embeddings) != len(texts) {
		return nil, u, a.unusableEmbeddings(fmt.Sprintf("gave %d embeddings for %d texts", len(resp.Embeddings), len(texts)))
	}
	out := make([][]float32, len(texts))
	for i, e := range resp.Embeddings {
		switch {
		case e == nil:
			return nil, u, a.unusableEmbeddings(fmt.Sprintf("gave no embedding for text %d", i+1))
		case len(e.Values) != memory.Dimensions:
			return nil, u, a.unusableEmbeddings(fmt.Sprintf("gave an embedding of %d dimensions, not %d", len(e.Values), memory.Dimensions))
		}
		out[i] = e.Values
	}
	return out, u, nil
}

// ErrEmbeddingUnusable is the Temporal error type of an embedding answer
// that does not fit the request (a count or a dimension that differs, a
// null embedding): a misconfigured embedding model answers the same way
// every time, so it is not retried.
const ErrEmbeddingUnusable = "EmbeddingUnusable"

func (a *Activities) unusableEmbeddings(what string) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the embedding model %q %s; check the embedding model setting (it must give %d-dimension embeddings)",
		clip.String(a.EmbeddingModel, 100), what, memory.Dimensions), ErrEmbeddingUnusable, nil)
}

// embedUsage is what one embedding call is billed for: the input tokens
// Vertex AI reports per text, else an estimate of 4 bytes a token (the
// Gemini API reports none).
func embedUsage(model string, resp *genai.EmbedContentResponse, texts []string) investigation.Usage {
	u := investigation.Usage{Calls: 1, Model: model}
	reported := 0
	for _, e := range resp.Embeddings {
		if e != nil && e.Statistics != nil {
			reported += int(e.Statistics.TokenCount)
		}
	}
	if reported > 0 {
		u.PromptTokens = reported
		return u
	}
	for _, t := range texts {
		u.PromptTokens += (len(t) + 3) / 4
	}
	return u
}

// RecallMemories embeds the request and returns the approved memories
// closest to it (cosine similarity at least MinSimilarity, at most
// RecallLimit).
func (a *Activities) RecallMemories(ctx context.Context, in RecallInput) (Recall, error) {
	vecs, usage, err := a.embed(ctx, "RETRIEVAL_QUERY", in.Request)
	if err != nil {
		return Recall{}, err
	}
	found, err := a.Memories.Recall(ctx, vecs[0], a.MinSimilarity, a.RecallLimit)
	if err != nil {
		return Recall{}, fmt.Errorf("recall memories: %w", err)
	}
	out := Recall{Memories: make([]MemoryNote, len(found)), Usage: usage}
	for i, m := range found {
		out.Memories[i] = MemoryNote{ID: m.ID, Claim: m.Claim, Kind: m.Kind, Table: m.Table, Columns: m.Columns, Score: m.Score, Similarity: m.Similarity}
	}
	return out, nil
}

// SubAgentTurn runs one model turn of the BigQuery sub-agent: how to work in
// the system instruction; the request and its recalled memories (with IDs,
// as a data block) in the first user content; the sub-agent's transcript;
// the BigQuery tools.
func (a *Activities) SubAgentTurn(ctx context.Context, in SubAgentTurnInput) (activities.TurnOutput, error) {
	system, user, err := render("subagent", map[string]any{"Request": in.Request, "Memories": memoriesText(in.Memories), "Final": in.Final})
	if err != nil {
		return activities.TurnOutput{}, err
	}
	contents, err := a.Model.Contents(ctx, in.Session, user, in.Transcript)
	if err != nil {
		return activities.TurnOutput{}, err
	}
	return a.Model.Turn(ctx, in.Session, in.Key, system, contents, a.Tools.Declarations(nil), in.Final)
}

// maxClaims is the most claims one session may propose.
const maxClaims = 5

// Bounds of what Introspect reads of the model's claims and returns of its
// refusals, so its result (in the sub-agent's history) stays small however
// many claims the model writes: the claims after the first maxClaimsRead
// are refused unread, and the refusals after the first maxRefused are
// counted, not listed.
const (
	maxClaimsRead = 10 * maxClaims
	maxRefused    = 10
)

// Introspect reviews the sub-agent's session and returns the claims it
// proposes and the recalled memories that helped or misled. The model sees
// the session's structure only (sessionView: the schemas read, the SQL
// without values, row counts, errors), never a row or the answer. Code then
// decides: IDs that were not recalled are dropped, and so is every claim
// memory.CheckClaim refuses against the schemas the session read (the
// refusals are returned, never stored).
func (a *Activities) Introspect(ctx context.Context, in IntrospectInput) (Introspection, error) {
	view, err := a.session(ctx, in.Session, in.Transcript)
	if err != nil {
		return Introspection{}, err
	}
	session, err := prompt.MarshalJSON(view, "  ")
	if err != nil {
		return Introspection{}, fmt.Errorf("encode the session: %w", err)
	}
	system, user, err := render("introspect", map[string]any{"Memories": memoriesText(in.Memories), "Session": string(session),
		"Kinds": memory.Kinds, "MaxClaims": maxClaims, "MaxClaimBytes": memory.MaxClaimBytes, "Example": introspectExample})
	if err != nil {
		return Introspection{}, err
	}
	var out Introspection
	out.Usage, err = a.Model.GenerateJSON(ctx, "introspection", system, user, introspectSchema, &out, func() error { return nil })
	if err != nil {
		return Introspection{}, err
	}
	recalled := make([]string, len(in.Memories))
	for i, m := range in.Memories {
		recalled[i] = m.ID
	}
	known := func(ids []string) []string {
		var keep []string
		for _, id := range ids {
			if slices.Contains(recalled, id) && !slices.Contains(keep, id) {
				keep = append(keep, id)
			}
		}
		return keep
	}
	out.Helpful, out.Harmful, out.Refused = known(out.Helpful), known(out.Harmful), nil
	seen := view.schemas()
	var claims []memory.Claim
	more := max(len(out.Claims)-maxClaimsRead, 0)
	for _, c := range out.Claims[:len(out.Claims)-more] {
		checked, err := memory.CheckClaim(c, a.Tables, seen)
		if err != nil {
			if len(out.Refused) < maxRefused {
				out.Refused = append(out.Refused, err.Error())
				activities.Logger(ctx).Warn("introspection claim refused", "reason", err.Error())
			} else {
				more++
			}
			continue
		}
		if len(claims) < maxClaims && !slices.ContainsFunc(claims, func(k memory.Claim) bool { return claimID(k) == claimID(checked) }) {
			claims = append(claims, checked)
		}
	}
	if more > 0 {
		out.Refused = append(out.Refused, fmt.Sprintf("%d more claims were refused", more))
		activities.Logger(ctx).Warn("introspection claims refused", "more", more, "read", min(len(out.Claims), maxClaimsRead))
	}
	out.Claims = claims
	return out, nil
}

// memoriesText renders recalled memories for a data block, one per line
// with its ID, and what it is about when it says.
func memoriesText(ms []MemoryNote) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteByte('\n')
		}
		if m.Kind == "" {
			fmt.Fprintf(&b, "[%s] %s", m.ID, m.Claim)
			continue
		}
		fmt.Fprintf(&b, "[%s] %s (%s; %s): %s", m.ID, m.Table, m.Kind, strings.Join(m.Columns, ", "), m.Claim)
	}
	return b.String()
}

// claimID is the memory ID of a claim: it derives from the claim alone, so
// a retried activity, or another session learning the same, finds the
// memory already there (memory.Store.Propose), whatever its status.
func claimID(c memory.Claim) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{c.Kind, c.Table, strings.Join(c.Columns, ","), c.Text}, "\x00")))
	return "m-" + hex.EncodeToString(sum[:8])
}

// UpdateMemories proposes the claims, with their embeddings, as memories
// (with AutoApprove, those memory.ApprovableAtOnce takes are approved at
// once; the others wait for review all the same), and adjusts the scores of helpful
// (+1) and harmful (-1) memories; memories that fall below -3 are deleted.
// A claim without a kind (from an introspection recorded before claims
// were typed, never checked) is not stored. Claim IDs derive from the
// claim and each vote is recorded under the parent investigation's
// session, so a retried activity adds no copy and changes no score twice,
// and the several sub-agent runs one alert can start vote once per memory.
func (a *Activities) UpdateMemories(ctx context.Context, in MemoryUpdate) (MemoryChanges, error) {
	var out MemoryChanges
	claims := slices.DeleteFunc(slices.Clone(in.Claims), func(c memory.Claim) bool { return c.Kind == "" })
	if len(claims) > 0 {
		texts := make([]string, len(claims))
		for i, c := range claims {
			texts[i] = c.Table + ": " + c.Text
		}
		vecs, usage, err := a.embed(ctx, "RETRIEVAL_DOCUMENT", texts...)
		if err != nil {
			return out, err
		}
		out.Usage = usage
		for i, c := range claims {
			st := memory.StatusProposed
			if a.AutoApprove && memory.ApprovableAtOnce(c) {
				st = memory.StatusApproved
			}
			m, created, err := a.Memories.Propose(ctx, claimID(c), c, in.Request, vecs[i], st)
			if err != nil {
				return out, fmt.Errorf("save memory: %w", err)
			}
			if created {
				out.Saved = append(out.Saved, m.ID)
				if st == memory.StatusApproved {
					out.Approved = append(out.Approved, m.ID)
				}
			}
		}
	}
	voter := in.ParentSession
	if voter == "" { // an input recorded before it carried the parent
		voter = in.Session
	}
	deleted, err := a.Memories.Adjust(ctx, voter, in.Helpful, in.Harmful)
	if err != nil {
		return out, fmt.Errorf("adjust memory scores: %w", err)
	}
	out.Deleted = deleted
	return out, nil
}

// DeliverAnswer stores the sub-agent's answer, with the link to its run, as
// the parent investigation's tool result. An answer too long for
// MaxResultBytes is cut, not the result around it, so the link survives.
func (a *Activities) DeliverAnswer(ctx context.Context, in DeliverInput) (activities.ToolOutput, error) {
	raw, size, cut, err := answerResult(in.Answer, in.Link, in.NoQuery, in.MaxResultBytes)
	if err != nil {
		return activities.ToolOutput{}, err
	}
	entry := transcript.Entry{Kind: transcript.KindTool, CallID: in.CallID, Tool: in.Tool, Response: string(raw)}
	if _, err := a.Model.Transcript.Put(ctx, in.ParentSession, in.ResultKey, entry); err != nil {
		return activities.ToolOutput{}, err
	}
	link := in.Link
	return activities.ToolOutput{Key: in.ResultKey, OK: true, Bytes: size, Truncated: cut, Preview: clip.String(in.Answer, 160), Link: &link}, nil
}

// noQueryNote is what the parent's model reads beside an answer no query
// backs.
const noQueryNote = "none: no query of the sub-agent succeeded, so this answer rests on no log data"

// answerResult encodes the bigquery_agent result {answer, child_workflow_id,
// child_run_id, and evidence when no query backs it} in at most limit bytes. When the whole is larger, the answer
// alone is cut (clip.String marks the cut) and a note says so; the
// IDs are always kept, even in the (misconfigured) case where they alone
// exceed limit. size is the length of the uncut result.
func answerResult(answer string, link activities.ChildLink, noQuery bool, limit int) (raw []byte, size int, cut bool, err error) {
	result := map[string]any{
		"answer":            answer,
		"child_workflow_id": link.WorkflowID,
		"child_run_id":      link.RunID,
	}
	if noQuery {
		result["evidence"] = noQueryNote
	}
	if raw, err = prompt.MarshalJSON(result, ""); err != nil || len(raw) <= limit {
		return raw, len(raw), false, err
	}
	size = len(raw)
	result["truncated"] = true
	result["total_bytes"] = size
	result["note"] = fmt.Sprintf("The answer was %d bytes and was cut to fit the %d-byte result; the whole answer is in the history of child workflow %s.", len(answer), limit, link.WorkflowID)
	// JSON escapes make the encoded answer longer than its text, so find the
	// longest cut that fits by bisection; a cut longer than limit never does.
	var best []byte
	for lo, hi := 0, min(len(answer), limit); lo <= hi; {
		keep := (lo + hi) / 2
		result["answer"] = clip.String(answer, keep)
		if raw, err = prompt.MarshalJSON(result, ""); err != nil {
			return nil, 0, false, err
		}
		if len(raw) <= limit {
			best, lo = raw, keep+1
		} else {
			hi = keep - 1
		}
	}
	if best == nil { // not even the IDs fit: keep them all the same
		result["answer"] = clip.String(answer, 0)
		best, err = prompt.MarshalJSON(result, "")
	}
	return best, size, true, err
}
