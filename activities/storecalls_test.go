package activities

import (
	"context"
	"os"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/modeltest"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/tools"
	"github.com/secops-agent/investigator/transcript"
)

// storeCalls counts the calls the worker's caches pass to the real
// Firestore stores.
type storeCalls struct {
	alerts.Getter
	transcript.Durable
	mu sync.Mutex
	n  int
}

func (s *storeCalls) count() {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
}

// take returns the calls since the last take.
func (s *storeCalls) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.n
	s.n = 0
	return n
}

func (s *storeCalls) Get(ctx context.Context, id string) (alerts.Alert, error) {
	s.count()
	return s.Getter.Get(ctx, id)
}

func (s *storeCalls) Put(ctx context.Context, session, key string, e transcript.Entry) (transcript.Entry, error) {
	s.count()
	return s.Durable.Put(ctx, session, key, e)
}

func (s *storeCalls) GetAll(ctx context.Context, session string, keys []string) ([]transcript.Entry, error) {
	s.count()
	return s.Durable.GetAll(ctx, session, keys)
}

// A worker's activities over the real stores, with the caches the worker
// puts in front of them.
func cachedWorker(t *testing.T, fs *firestore.Client, answers ...*genai.GenerateContentResponse) (*Activities, *storeCalls, *modeltest.LLM) {
	t.Helper()
	store := alerts.NewStore(fs)
	calls := &storeCalls{Getter: store, Durable: transcript.NewStore(fs)}
	cache := alerts.NewCache(calls, 1<<20)
	// get_alert reads through the cache the model phases fill, as in the worker.
	reg, err := tools.NewRegistry(tools.NewSearchAlerts(store), tools.NewGetAlert(cache))
	require.NoError(t, err)
	llm := modeltest.New(answers...)
	return &Activities{
		Model:  &Model{LLM: llm, Name: "m", Transcript: transcript.NewCache(calls, 1<<20)},
		Tools:  reg,
		Alerts: cache,
	}, calls, llm
}

// On a warm worker each model turn costs one store call, the write of its
// answer; reflection and the conclusion read nothing from Firestore. A
// worker that has seen none of it reads through and sends the model the
// same conversation.
func TestWarmWorkerModelTurnsWriteOnly(t *testing.T) {
	testenv.Firestore(t)
	ctx := context.Background()
	fs, err := firestore.NewClient(ctx, testenv.Project)
	require.NoError(t, err)
	defer fs.Close()
	raw, err := os.ReadFile("../examples/alerts/guardduty-ssh-bruteforce.json")
	require.NoError(t, err)
	al, err := alerts.Parse(raw)
	require.NoError(t, err)
	require.NoError(t, alerts.NewStore(fs).Put(ctx, al))

	callAlert := &genai.GenerateContentResponse{Candidates: []*genai.Candidate{{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{
		{FunctionCall: &genai.FunctionCall{ID: "c1", Name: "get_alert", Args: map[string]any{"id": al.ID}}},
	}}}}}
	w, calls, warmLLM := cachedWorker(t, fs,
		text(`{"objective":"o","steps":[{"id":"1","description":"Read the alert","tools":["get_alert"]},{"id":"2","description":"Conclude","tools":["get_alert"]}]}`),
		callAlert, text("The source is 198.51.100.23."),
		text(`{"insights":["brute force"],"plan_updates":[],"achieved":false}`),
		text("Nothing more."),
		text(`{"report":"r","evidence":[],"verdict":"undetermined","confidence":"low"}`))
	const session = "wf-store-calls"
	step1 := plan.Step{ID: "step_1", Description: "Read the alert", Tools: []string{"get_alert"}}
	step2 := plan.Step{ID: "step_2", Description: "Conclude", Tools: []string{"get_alert"}}

	_, err = w.GeneratePlan(ctx, PlanInput{AlertID: al.ID, MaxSteps: 5})
	require.NoError(t, err)
	require.Equal(t, 1, calls.take(), "the worker's first read of the alert")

	turn1 := TurnInput{Session: session, Key: "t1-step_1-i1", AlertID: al.ID, Objective: "o", Step: step1}
	out, err := w.ModelTurn(ctx, turn1)
	require.NoError(t, err)
	require.Len(t, out.Calls, 1)
	require.Equal(t, 1, calls.take(), "a first turn: its write")

	tool, err := w.CallTool(ctx, ToolInput{Session: session, Key: "t1-step_1-i1-c1", Call: out.Calls[0], MaxResultBytes: 4096})
	require.NoError(t, err)
	require.True(t, tool.OK)
	require.Equal(t, 1, calls.take(), "get_alert reads the alert from memory: only its result's write")

	turn2 := turn1
	turn2.Key, turn2.Final, turn2.Transcript = "t1-step_1-i2", true, []Ref{{Key: turn1.Key}, {Key: tool.Key}}
	out, err = w.ModelTurn(ctx, turn2)
	require.NoError(t, err)
	require.Equal(t, "The source is 198.51.100.23.", out.Text)
	require.Equal(t, 1, calls.take(), "a later turn reads its transcript from memory: only its write")

	step1.Status, step1.ResultKey = plan.Done, turn2.Key
	_, err = w.Reflect(ctx, ReflectInput{Session: session, Objective: "o", Step: step1, Pending: []plan.Step{step2}, Steps: 2, MaxSteps: 5})
	require.NoError(t, err)
	require.Equal(t, 0, calls.take(), "reflection reads the step's answer from memory")

	_, err = w.ModelTurn(ctx, TurnInput{Session: session, Key: "t1-step_2-i1", AlertID: al.ID, Objective: "o", Step: step2,
		Earlier: []StepRef{{StepID: "step_1", Description: step1.Description, Key: turn2.Key}}})
	require.NoError(t, err)
	require.Equal(t, 1, calls.take(), "a turn of the next step: only its write")

	_, err = w.Conclude(ctx, ConcludeInput{Session: session, AlertID: al.ID, Objective: "o", Steps: []plan.Step{step1}, Language: "en"})
	require.NoError(t, err)
	require.Equal(t, 0, calls.take(), "the conclusion reads the alert and the results from memory")

	// Another worker (or this one restarted) runs the second turn again.
	cold, coldCalls, coldLLM := cachedWorker(t, fs, text("A different answer, lost to the first write."))
	again, err := cold.ModelTurn(ctx, turn2)
	require.NoError(t, err)
	require.Equal(t, "The source is 198.51.100.23.", again.Text, "the turn Firestore holds")
	require.Equal(t, 3, coldCalls.take(), "the alert, the transcript in one read, and the write")
	sent, resent := warmLLM.Calls[2].Contents, coldLLM.Calls[0].Contents
	require.Equal(t, untagged(userText(sent[0])), untagged(userText(resent[0])), "the same opening as the warm worker sent (its block tag aside)")
	require.Equal(t, sent[1:], resent[1:], "the same conversation as the warm worker sent")
}
