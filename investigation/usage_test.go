package investigation

import (
	"encoding/json"
	"fmt"
	"testing"
)

// The sub-agent's phase sums its model turns and its memory embeddings:
// the sum keeps each model's part, so each can be priced at its own model.
func TestAddKeepsEachModel(t *testing.T) {
	flash := Usage{Calls: 1, PromptTokens: 40000, OutputTokens: 1200, ThoughtTokens: 7, Model: "gemini-2.5-flash"}
	embed := Usage{Calls: 1, PromptTokens: 30, Model: "gemini-embedding-001"}
	var sub Usage
	sub = sub.Add(flash).Add(embed).Add(flash)
	if sub.Calls != 3 || sub.PromptTokens != 80030 || sub.OutputTokens != 2400 || sub.ThoughtTokens != 14 || sub.Model != MixedModels {
		t.Fatalf("totals %+v", sub)
	}
	got := sub.PerModel()
	want := []Usage{{Calls: 2, PromptTokens: 80000, OutputTokens: 2400, ThoughtTokens: 14, Model: "gemini-2.5-flash"}, embed}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("per model %+v, want %+v", got, want)
	}
	// Sums of sums (a phase charged two sub-agents' results) merge by model.
	if got := sub.Add(sub).PerModel(); len(got) != 2 || got[0].Calls != 4 || got[1].Calls != 2 {
		t.Errorf("sum of sums per model %+v", got)
	}
	// One model: no split, and the same JSON as before the split.
	one := flash.Add(flash)
	b, _ := json.Marshal(one)
	if string(b) != `{"calls":2,"prompt_tokens":80000,"output_tokens":2400,"thought_tokens":14,"model":"gemini-2.5-flash"}` {
		t.Errorf("one model's JSON %s", b)
	}
	// Usage recorded without its model counts with the first model by name.
	if got := (Usage{Calls: 1, PromptTokens: 5}).Add(embed.Add(flash)).PerModel(); got[0].Model != "gemini-2.5-flash" || got[0].Calls != 2 || len(got) != 2 {
		t.Errorf("unnamed usage %+v", got)
	}
	// The order of the additions does not matter.
	if a, b := embed.Add(flash).Add(flash), flash.Add(embed.Add(flash)); a != b {
		t.Errorf("%+v != %+v", a, b)
	}
	if got := (Usage{Calls: 1, PromptTokens: 5}).Add(flash); got.Model != "gemini-2.5-flash" || got.ByModel != (ModelSplit{}) {
		t.Errorf("unnamed usage with one model %+v", got)
	}
}

// The split holds MaxModels models; calls to further models stay in the
// totals and come out as OtherModels, which no table prices.
func TestSplitIsBounded(t *testing.T) {
	var u Usage
	for i := range MaxModels + 2 {
		u = u.Add(Usage{Calls: 1, PromptTokens: 10 * (i + 1), Model: fmt.Sprintf("m%d", i)})
	}
	u = u.Add(Usage{Calls: 1, PromptTokens: 1, Model: "m0"})
	parts := u.PerModel()
	if len(parts) != MaxModels+1 {
		t.Fatalf("parts %+v", parts)
	}
	if parts[0] != (Usage{Calls: 2, PromptTokens: 11, Model: "m0"}) {
		t.Errorf("first part %+v", parts[0])
	}
	if other := parts[MaxModels]; other != (Usage{Calls: 2, PromptTokens: 50 + 60, Model: OtherModels}) {
		t.Errorf("other models %+v", other)
	}
	// Added again, the rest stays the rest, however many sums it went through.
	if got := u.Add(u).PerModel(); len(got) != MaxModels+1 || got[MaxModels].Model != OtherModels || got[MaxModels].PromptTokens != 220 {
		t.Errorf("sum of bounded sums %+v", got)
	}
}

func TestUsageJSON(t *testing.T) {
	u := Usage{Calls: 1, PromptTokens: 40000, OutputTokens: 1200, Model: "gemini-2.5-flash"}.Add(Usage{Calls: 1, PromptTokens: 30, Model: "gemini-embedding-001"})
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	var back Usage
	if err := json.Unmarshal(b, &back); err != nil || back != u {
		t.Errorf("round trip of %s: %+v, %v", b, back, err)
	}

	// A phase recorded before the split: one unpriceable sum, named.
	var old Usage
	if err := json.Unmarshal([]byte(`{"calls":2,"prompt_tokens":40030,"output_tokens":1200,"model":"(several models)"}`), &old); err != nil {
		t.Fatal(err)
	}
	if got := old.PerModel(); len(got) != 1 || got[0].Model != MixedModels || got[0].Tokens() != 41230 {
		t.Errorf("an old mixed phase reads %+v", got)
	}

	// A forged split: parts past MaxModels are the rest, and parts that
	// claim more than the totals leave no negative rest.
	var forged Usage
	parts := `{"model":"a","calls":1,"prompt_tokens":1,"output_tokens":0}`
	for range 2 * MaxModels {
		parts += `,{"model":"a","calls":1,"prompt_tokens":1,"output_tokens":0}`
	}
	if err := json.Unmarshal([]byte(`{"calls":9,"prompt_tokens":9,"output_tokens":0,"model":"(several models)","by_model":[`+parts+`]}`), &forged); err != nil {
		t.Fatal(err)
	}
	if got := forged.PerModel(); len(got) != MaxModels+1 || got[MaxModels] != (Usage{Calls: 5, PromptTokens: 5, Model: OtherModels}) {
		t.Errorf("a long split reads %+v", got)
	}
	if err := json.Unmarshal([]byte(`{"calls":1,"prompt_tokens":1,"output_tokens":0,"by_model":[{"model":"a","calls":5,"prompt_tokens":500,"output_tokens":0}]}`), &forged); err != nil {
		t.Fatal(err)
	}
	if got := forged.PerModel(); len(got) != 1 || got[0].Model != "a" {
		t.Errorf("a split over its totals reads %+v", got)
	}
}
