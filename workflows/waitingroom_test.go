package workflows

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/investigation"
)

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func roomSettings(maxRunning int) intake.Settings {
	return intake.Settings{MaxRunning: maxRunning}.WithDefaults()
}

func alertOf(id, identity, severity string, keys ...string) intake.Alert {
	return intake.Alert{AlertID: id, Identity: identity, Severity: severity, Source: "generic", Title: "title of " + id, Keys: keys}
}

func TestRoomStartsInSeverityOrderOldestFirst(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	if o := r.admit(t0, s, alertOf("a1", "id:1", "low")); o.Kind != intake.OutcomeStarted {
		t.Fatalf("first alert: %+v", o)
	}
	for i, sev := range []string{"medium", "critical", "high", "critical", "unknown", "low"} {
		o := r.admit(t0.Add(time.Duration(i+1)*time.Second), s, alertOf(fmt.Sprintf("a%d", i+2), fmt.Sprintf("id:%d", i+2), sev))
		if o.Kind != intake.OutcomeQueued || o.Position == 0 {
			t.Fatalf("alert %d: %+v", i+2, o)
		}
	}
	var order []string
	for range 6 {
		running := r.Entities[0]
		for _, e := range r.Entities {
			if e.State == intake.StateStarting || e.State == intake.StateRunning {
				running = e
			}
		}
		r.started(running.WorkflowID)
		r.concluded(investigation.Concluded{WorkflowID: running.WorkflowID})
		started := r.schedule()
		if len(started) != 1 {
			t.Fatalf("after a conclusion %d started", len(started))
		}
		order = append(order, started[0].AlertID)
	}
	// critical (oldest first), high, medium, unknown, low.
	if got := strings.Join(order, " "); got != "a3 a5 a4 a2 a6 a7" {
		t.Errorf("start order %s", got)
	}
}

func TestRoomSeenAgain(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(5)
	first := alertOf("a1", "guardduty:1:f", "medium")
	first.Count = 214
	o := r.admit(t0, s, first)
	r.take(r.byWorkflow[o.WorkflowID])
	r.started(o.WorkflowID)
	again := alertOf("a2", "guardduty:1:f", "medium")
	again.Count = 310
	o2 := r.admit(t0.Add(time.Minute), s, again)
	if o2.Kind != intake.OutcomeSeenAgain || o2.WorkflowID != o.WorkflowID {
		t.Fatalf("seen again: %+v", o2)
	}
	e := r.byWorkflow[o.WorkflowID]
	if len(e.Queue) != 1 || !strings.Contains(e.Queue[0].Text(), "count 214 → 310") {
		t.Fatalf("queued %+v", e.Queue)
	}
	// The very same alert again (a redelivery): counted, not news.
	if o3 := r.admit(t0.Add(2*time.Minute), s, again); o3.Kind != intake.OutcomeSeenAgain || len(e.Queue) != 1 || e.Queue[0].Times != 2 {
		t.Fatalf("exact repeat: %+v, queue %+v", o3, e.Queue)
	}
	// A newer count while the first news waits: one arrival, from the first count.
	third := alertOf("a3", "guardduty:1:f", "high")
	third.Count = 400
	r.admit(t0.Add(3*time.Minute), s, third)
	if len(e.Queue) != 1 || !strings.Contains(e.Queue[0].Text(), "count 214 → 400") || !strings.Contains(e.Queue[0].Text(), "severity medium → high") {
		t.Fatalf("merged: %q", e.Queue[0].Text())
	}
	if len(r.Entities) != 1 || r.Counters.SeenAgain != 3 {
		t.Errorf("%d entities, %d seen again", len(r.Entities), r.Counters.SeenAgain)
	}
}

func TestRoomRepeatWithinTheWindow(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(5)
	o := r.admit(t0, s, alertOf("a1", "scc:f1", "high"))
	r.started(o.WorkflowID)
	r.close(t0.Add(time.Hour), o.WorkflowID)
	if rep := r.admit(t0.Add(2*time.Hour), s, alertOf("a2", "scc:f1", "medium")); rep.Kind != intake.OutcomeRepeat || rep.WorkflowID != o.WorkflowID {
		t.Fatalf("lower severity within the window: %+v", rep)
	}
	if rep := r.admit(t0.Add(3*time.Hour), s, alertOf("a2", "scc:f1", "high")); rep.Kind != intake.OutcomeRepeat {
		t.Fatalf("same severity within the window: %+v", rep)
	}
	rose := r.admit(t0.Add(4*time.Hour), s, alertOf("a3", "scc:f1", "critical"))
	if rose.Kind != intake.OutcomeStarted || rose.WorkflowID != o.WorkflowID || !r.byWorkflow[o.WorkflowID].Reinvestigate {
		t.Fatalf("severity rose: %+v", rose)
	}
	r.started(rose.WorkflowID)
	r.close(t0.Add(5*time.Hour), rose.WorkflowID)
	// After the window it is investigated again.
	later := t0.Add(5*time.Hour + 25*time.Hour)
	r.tick(later)
	if again := r.admit(later, s, alertOf("a4", "scc:f1", "low")); again.Kind != intake.OutcomeStarted {
		t.Fatalf("after the window: %+v", again)
	}
	if r.Counters.Repeats != 2 || r.Counters.Reinvested != 1 {
		t.Errorf("counters %+v", r.Counters)
	}
}

func TestRoomGroupsABurstFromOneAddress(t *testing.T) {
	for _, noGroup := range []bool{false, true} {
		r := newRoom(t0)
		s := roomSettings(10)
		s.NoGroup = noGroup
		kinds := map[string]int{}
		for i := range 50 {
			o := r.admit(t0.Add(time.Duration(i)*time.Second), s, alertOf(fmt.Sprintf("a%d", i), fmt.Sprintf("generic:id:%d", i), "high",
				"ip:198.51.100.23", fmt.Sprintf("resource:host-%d", i)))
			kinds[o.Kind]++
		}
		switch {
		case !noGroup && (len(r.Entities) != 1 || r.Entities[0].Alerts != 50 || kinds[intake.OutcomeGrouped] != 49):
			t.Errorf("grouping: %d entities, outcomes %v", len(r.Entities), kinds)
		case noGroup && len(r.Entities) != 50:
			t.Errorf("--no-group: %d entities, outcomes %v", len(r.Entities), kinds)
		}
	}
}

func TestRoomGroupWindowAndFollowUps(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(10)
	o := r.admit(t0, s, alertOf("a1", "id:1", "high", "user:alice"))
	r.take(r.byWorkflow[o.WorkflowID])
	r.started(o.WorkflowID)
	r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID})
	if f := r.admit(t0.Add(10*time.Minute), s, alertOf("a2", "id:2", "medium", "user:alice")); f.Kind != intake.OutcomeFollowUp || f.WorkflowID != o.WorkflowID {
		t.Fatalf("related to a concluded investigation: %+v", f)
	}
	// Past the group window, the same indicator starts its own.
	if n := r.admit(t0.Add(61*time.Minute), s, alertOf("a3", "id:3", "medium", "user:alice")); n.Kind != intake.OutcomeStarted || n.WorkflowID == o.WorkflowID {
		t.Fatalf("past the window: %+v", n)
	}
}

func TestRoomBudget(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(10)
	s.DailyBudgetUSD = 0.01
	o := r.admit(t0, s, alertOf("a1", "id:1", "high"))
	r.started(o.WorkflowID)
	spend := investigation.Spend{}
	spend.ByPhase.Plan = investigation.Usage{Calls: 1, PromptTokens: 100000, Model: "gemini-2.5-flash"} // 0.03 USD
	r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID, Spend: spend})
	if r.Spent < 0.029 {
		t.Fatalf("spent %f", r.Spent)
	}
	held := r.admit(t0.Add(time.Minute), s, alertOf("a2", "id:2", "high"))
	if held.Kind != intake.OutcomeHeld {
		t.Fatalf("over the budget: %+v", held)
	}
	if crit := r.admit(t0.Add(2*time.Minute), s, alertOf("a3", "id:3", "critical")); crit.Kind != intake.OutcomeStarted {
		t.Fatalf("critical over the budget: %+v", crit)
	}
	// A second report of the same investigation counts only what is new.
	r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID, Spend: spend})
	if r.Spent > 0.031 {
		t.Errorf("counted twice: %f", r.Spent)
	}
	rel := r.release(intake.Release{IDs: []string{"a2", "nope"}})
	if len(rel.WorkflowIDs) != 1 || len(rel.Unknown) != 1 {
		t.Fatalf("release: %+v", rel)
	}
	if started := r.schedule(); len(started) != 1 || started[0].AlertID != "a2" {
		t.Fatalf("released: %v", started)
	}
	held2 := r.admit(t0.Add(3*time.Minute), s, alertOf("a4", "id:4", "low"))
	if held2.Kind != intake.OutcomeHeld {
		t.Fatalf("second held: %+v", held2)
	}
	r.tick(t0.Add(14 * time.Hour)) // the next UTC day
	if started := r.schedule(); len(started) != 1 || started[0].AlertID != "a4" || r.Spent != 0 {
		t.Fatalf("next day: %v, spent %f", started, r.Spent)
	}
}

func TestRoomShedsWhenFullAndForgetsConcludedFirst(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	s.NoGroup = true
	for i := range maxOpen {
		r.admit(t0, s, alertOf(fmt.Sprintf("a%d", i), fmt.Sprintf("id:%d", i), "low"))
	}
	if o := r.admit(t0, s, alertOf("x", "id:x", "low")); o.Kind != intake.OutcomeShed {
		t.Fatalf("full room: %+v", o)
	}
	first := r.Entities[0]
	r.started(first.WorkflowID)
	r.concluded(investigation.Concluded{WorkflowID: first.WorkflowID})
	if o := r.admit(t0, s, alertOf("x", "id:x", "low")); o.Kind == intake.OutcomeShed {
		t.Fatalf("a concluded one could be forgotten: %+v", o)
	}
	if len(r.Entities) != maxOpen || r.byWorkflow[first.WorkflowID] != nil {
		t.Errorf("%d entities", len(r.Entities))
	}
}

func TestRoomCloseReadmitsUndeliveredRelatedAlerts(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(10)
	o := r.admit(t0, s, alertOf("a1", "id:1", "high", "ip:203.0.113.5"))
	r.take(r.byWorkflow[o.WorkflowID])
	r.started(o.WorkflowID)
	r.admit(t0.Add(time.Second), s, alertOf("a2", "id:2", "high", "ip:203.0.113.5"))
	r.close(t0.Add(2*time.Second), o.WorkflowID)
	if len(r.Entities) != 1 || r.Entities[0].AlertID != "a2" || r.Entities[0].State != intake.StateStarting {
		t.Fatalf("entities after close: %+v", r.Entities)
	}
	if r.pending != 0 || r.members != 1 {
		t.Errorf("pending %d, members %d", r.pending, r.members)
	}
}

// A related alert whose delivery failed after its investigation's close
// was received (the close took only what was still queued), or that the
// investigation handed back as it closed, gets an investigation of its
// own, not a repeat.
func TestRoomReadmitsRelatedAlertsThatCameTooLate(t *testing.T) {
	for _, via := range []string{"requeue", "handed back"} {
		r := newRoom(t0)
		s := roomSettings(10)
		o := r.admit(t0, s, alertOf("a1", "id:1", "high", "ip:203.0.113.5"))
		e := r.byWorkflow[o.WorkflowID]
		r.take(e)
		r.started(o.WorkflowID)
		r.admit(t0.Add(time.Second), s, alertOf("a2", "id:2", "high", "ip:203.0.113.5"))
		batch := r.take(e) // the signal is on its way
		r.close(t0.Add(2*time.Second), o.WorkflowID)
		switch via {
		case "requeue":
			if r.requeue(e, batch) {
				t.Fatal("requeued into a closed entity")
			}
		}
		r.readmit(t0.Add(3*time.Second), batch.Arrivals)
		if len(r.Entities) != 1 || r.Entities[0].AlertID != "a2" || r.Entities[0].State != intake.StateStarting {
			t.Fatalf("%s: entities: %+v", via, r.Entities)
		}
		if r.Counters.Repeats != 0 || r.Counters.Alerts != 2 {
			t.Errorf("%s: counters %+v", via, r.Counters)
		}
	}
}

// TestRoomStateIsBounded fills every bound of the room with the longest
// values an admit request may carry, written in characters JSON escapes
// ('<' and '&' are 6 bytes, "\u0001" too), in multibyte text and in invalid
// UTF-8 as well as in ASCII: the state that continue-as-new hands on stays
// under maxRoomBytes, well below Temporal's 2 MB payload limit.
func TestRoomStateIsBounded(t *testing.T) {
	for _, fill := range []string{"x", "<", "&", "\u0001", "\u2028", "\xff", "é", "语", "𝔘"} {
		t.Run(fmt.Sprintf("%q", fill), func(t *testing.T) {
			r := newRoom(t0)
			s := roomSettings(1)
			long := func(fill, prefix string, i, n int) string {
				p := fmt.Sprintf("%s%d-", prefix, i)
				return p + strings.Repeat(fill, (n-len(p))/len(fill))
			}
			keys := func(i int) []string {
				var k []string
				for j := range intake.MaxAlertKeys {
					k = append(k, long(fill, fmt.Sprintf("resource:%d.", j), i, intake.MaxKeyBytes))
				}
				return k
			}
			// The ID, identity, source and traceparent are kept exactly, so
			// Check refuses them unless plain (Identify hashes an identity
			// that is not): their longest plain values. A severity that is
			// no level is kept as "unknown".
			label := strings.Repeat("s", 16)
			tp := strings.Repeat("0", 128)
			alert := func(id, identity string, i int) intake.Alert {
				a := intake.Alert{AlertID: long("x", id, i, 100), Identity: identity, Severity: long(fill, "", i, 64), Source: label, Traceparent: tp,
					Title: long(fill, "", i, intake.MaxTitleBytes), Keys: keys(i), Count: 1 << 40}
				if err := a.Check(); err != nil {
					t.Fatal(err)
				}
				return a
			}
			for i := range maxOpen * 3 {
				a := alert("a", intake.PlainIdentity(long(fill, "generic:id:", i, intake.MaxIdentityBytes)), i)
				r.admit(t0, s, a)
				// Grouped alerts and news fill the members and the queues.
				for j := range 8 {
					b := alert("b", intake.PlainIdentity(long(fill, "generic:id:b", i*10+j, intake.MaxIdentityBytes)), i)
					r.admit(t0, s, b)
					b.AlertID = long("x", "c", i*10+j, 100)
					r.admit(t0, s, b)
				}
			}
			for i := range maxClosed {
				r.Closed = append(r.Closed, ClosedIdentity{Hash: hashOf(fmt.Sprint(i)), Severity: alerts.SeverityCritical, At: t0,
					WorkflowID: intake.WorkflowID(long(fill, "generic:id:", i, intake.MaxIdentityBytes))})
			}
			// Shed readmissions wait beside the room: alerts a forged
			// investigation_closed signal returns, whose texts no check
			// bounds but the identity's, ID's, source's and title's.
			forged := long(fill, "", 0, 64<<10)
			for i := range maxReadmits + 1 {
				a := alert("r", intake.PlainIdentity(long(fill, "generic:id:r", i, intake.MaxIdentityBytes)), i)
				r.readmit(t0, []investigation.Arrival{{Kind: investigation.ArrivalRelated, AlertID: a.AlertID, Identity: a.Identity,
					Source: a.Source, Severity: forged, Title: a.Title, Count: a.Count, PrevCount: a.Count, PrevSeverity: forged, Times: 1 << 30,
					Shared: forged, At: t0}})
			}
			if len(r.Readmits) != maxReadmits {
				t.Fatalf("%d readmissions kept, not %d", len(r.Readmits), maxReadmits)
			}
			// The runs that said they closed, kept a while.
			for i := range maxEnded + 1 {
				r.ended(t0, investigation.Closed{WorkflowID: "w", Session: long(fill, "w~", i, 64<<10)})
			}
			if len(r.Ended) != maxEnded {
				t.Fatalf("%d ended runs kept, not %d", len(r.Ended), maxEnded)
			}
			// The runs of entities forgotten while open, with what they
			// reported (at its widest).
			for i := range maxForgotten + 1 {
				r.forget(&Entity{WorkflowID: long(fill, "w", i, 1000), Admitted: t0, Cost: -math.MaxFloat64})
			}
			if len(r.Forgotten) != maxForgotten {
				t.Fatalf("%d forgotten runs kept, not %d", len(r.Forgotten), maxForgotten)
			}
			// Every entity a reinvestigation attached to an older run.
			// Every entity at its widest: released, concluded (the longest
			// state), failed starts with a retry time to the nanosecond, the
			// widest cost a forged signal can report.
			for _, e := range r.Entities {
				e.Reinvestigate, e.PrevSeverity, e.Attached, e.RunConcluded = true, alerts.SeverityCritical, true, true
				e.RunHash = hashOf(e.WorkflowID)
				e.Released, e.State, e.Attempts = true, intake.StateConcluded, maxStartAttempts-1
				e.Cost, e.RetryAt = -math.MaxFloat64, t0.Add(time.Hour+123456789)
				for i := range e.Members {
					e.Members[i].Lost = true
				}
			}
			// The settings the room keeps whole, at the bounds Check allows,
			// and every number at its widest.
			s.Prices = pricing.Table{Currency: "USD", Source: long("x", "", 0, 200), Models: map[string]pricing.Price{}}
			for i := range intake.MaxPriceModels {
				s.Prices.Models[long("x", "m", i, 64)] = pricing.Price{Input: 123456.78901234567, Output: 123456.78901234567}
			}
			s.Delivery = investigation.Delivery{Slack: true, ResultsTopic: long("x", "projects/p/topics/", 0, 300)}
			s.DailyBudgetUSD = math.MaxFloat64
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			r.Settings = s
			r.Spent, r.Seq, r.NextCheck = -math.MaxFloat64, math.MaxInt64, t0.Add(123456789)
			c := reflect.ValueOf(&r.Counters).Elem()
			for i := range c.NumField() {
				c.Field(i).SetInt(math.MinInt64)
			}
			raw, err := json.Marshal(AdmissionInput{Room: r})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Entities) != maxOpen || r.members > maxMembers+maxOpen || r.pending != maxPending {
				t.Fatalf("bounds not reached or passed: %d entities, %d members, %d pending", len(r.Entities), r.members, r.pending)
			}
			if len(raw) > maxRoomBytes {
				t.Errorf("the room at its bounds is %d KiB, over %d KiB", len(raw)>>10, maxRoomBytes>>10)
			}
			t.Logf("the room at its bounds: %d KiB", len(raw)>>10)
		})
	}
}

// TestAlertCheckRefusesEscapedExactText: what the room keeps exactly (the
// alert ID, identity, traceparent, source) must be plain, or an admit
// request could make it six times its bounds; the title is made plain.
func TestAlertCheckRefusesEscapedExactText(t *testing.T) {
	ok := intake.Alert{AlertID: "generic-0123456789ab", Identity: "generic:id:1", Severity: "low", Source: "generic", Title: "<script>&\"\u0001"}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(*intake.Alert){
		"id":          func(a *intake.Alert) { a.AlertID = "a<b" },
		"identity":    func(a *intake.Alert) { a.Identity = "generic:id:<&>" },
		"traceparent": func(a *intake.Alert) { a.Traceparent = "00-\u0001" },
		"source":      func(a *intake.Alert) { a.Source = "g&d" },
		"long source": func(a *intake.Alert) { a.Source = strings.Repeat("s", 17) },
	} {
		a := ok
		bad(&a)
		if err := a.Check(); err == nil {
			t.Errorf("%s: %+v passed Check", name, a)
		}
	}
	r := newRoom(t0)
	r.admit(t0, roomSettings(1), ok)
	if e := r.Entities[0]; e.Title != "‹script›＆'\u0020" {
		t.Errorf("the room keeps the title %q", e.Title)
	}
}

// TestOneCollectorDoesNotGroupUnrelatedAlerts: two alerts a SIEM forwards
// through one collector (device.host) about other servers and other
// attackers each get their own investigation; the collector is no key.
func TestOneCollectorDoesNotGroupUnrelatedAlerts(t *testing.T) {
	raw, err := os.ReadFile("../examples/alerts/siem-struts2-rce-raw-log.json")
	if err != nil {
		t.Fatal(err)
	}
	other := strings.NewReplacer("app01", "hr-db07", "192.168.10.21", "10.9.8.7", "Apache Struts2", "Mimikatz on",
		"203.0.113.45", "198.18.0.9", "7f3c2e10", "00000001").Replace(string(raw))
	r := newRoom(t0)
	s := roomSettings(10)
	var kinds []string
	for i, body := range []string{string(raw), other} {
		al, err := alerts.Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		a := intake.Alert{AlertID: al.ID, Identity: intake.Identify(al).Key, Severity: al.Severity, Source: al.Source, Title: al.Title, Keys: intake.Keys(al.Data)}
		if slices.ContainsFunc(a.Keys, func(k string) bool { return strings.Contains(k, "siem-collector-02") }) {
			t.Errorf("the collector is a key of %s: %q", al.ID, a.Keys)
		}
		kinds = append(kinds, r.admit(t0.Add(time.Duration(i)*5*time.Minute), s, a).Kind)
	}
	if kinds[0] != intake.OutcomeStarted || kinds[1] != intake.OutcomeStarted || len(r.Entities) != 2 {
		t.Errorf("outcomes %v, %d investigations: two unrelated alerts from one collector were grouped", kinds, len(r.Entities))
	}
	// The same attacker against another server is grouped, by its address.
	same := strings.NewReplacer("app01", "hr-db07", "192.168.10.21", "10.9.8.7", "7f3c2e10", "00000002").Replace(string(raw))
	al, _ := alerts.Parse([]byte(same))
	if o := r.admit(t0.Add(10*time.Minute), s, intake.Alert{AlertID: al.ID, Identity: intake.Identify(al).Key, Severity: al.Severity,
		Source: al.Source, Keys: intake.Keys(al.Data)}); o.Kind != intake.OutcomeGrouped {
		t.Errorf("the same attacker's next alert: %s %s", o.Kind, o.Message)
	}
}

// More open entities than one check takes are all checked in turn: a run
// admitted after maxChecked concluded, idle ones was never checked until
// they closed (a terminated one held its slot meanwhile). Runs recorded
// before the guards check the first maxChecked each time.
func TestChecksTakeEveryOpenEntityInTurn(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(maxOpen)
	s.NoGroup = true
	const n = maxChecked + 50
	for i := range n {
		o := r.admit(t0, s, alertOf(fmt.Sprintf("a%d", i), fmt.Sprintf("id:%d", i), "low"))
		e := r.byWorkflow[o.WorkflowID]
		r.take(e)
		r.started(e.WorkflowID)
	}
	checked := map[string]int{}
	for range 2 {
		ids, seqs := r.toCheck(nil)
		if len(ids) != maxChecked || len(seqs) != maxChecked {
			t.Fatalf("a check took %d IDs (%d seqs), want %d", len(ids), len(seqs), maxChecked)
		}
		for _, id := range ids {
			checked[id]++
		}
	}
	if len(checked) != n {
		t.Fatalf("two checks reached %d of %d open entities", len(checked), n)
	}

	r.guards = false
	r.CheckedTo = 0
	first, _ := r.toCheck(nil)
	again, _ := r.toCheck(nil)
	if !slices.Equal(first, again) {
		t.Fatal("before the guards, a check takes the first maxChecked each time")
	}
}

// TestDroppedArrivalIsNoRepeat: a decoy investigation whose queue is full
// takes a critical finding that shares one of its keys; the finding is
// only counted (no model sees it). When the decoy completes, the finding,
// sent again, must be investigated, not dismissed as a repeat; the
// decoy's delivered alerts are repeats as before.
func TestDroppedArrivalIsNoRepeat(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(10)
	decoy := r.admit(t0, s, alertOf("d0", "generic:id:decoy", "low", "ip:1.0.0.1"))
	r.take(r.byWorkflow[decoy.WorkflowID])
	r.started(decoy.WorkflowID)
	for i := range maxEntityQueue {
		r.admit(t0.Add(time.Second), s, alertOf(fmt.Sprintf("d%d", i+1), fmt.Sprintf("generic:id:decoy%d", i), "low", "ip:1.0.0.1"))
	}
	r.take(r.byWorkflow[decoy.WorkflowID]) // the 20 are delivered
	for i := range maxEntityQueue {
		r.admit(t0.Add(2*time.Second), s, alertOf(fmt.Sprintf("f%d", i), fmt.Sprintf("generic:id:fill%d", i), "low", "ip:1.0.0.1"))
	}
	real := r.admit(t0.Add(3*time.Second), s, alertOf("gd1", "guardduty:1:real", "critical", "ip:1.0.0.1", "ip:198.51.100.23"))
	e := r.byWorkflow[decoy.WorkflowID]
	if real.WorkflowID != decoy.WorkflowID || e.Dropped != 1 {
		t.Fatalf("the finding was not dropped by the decoy: %+v (dropped %d)", real, e.Dropped)
	}
	r.take(e) // the fillers are delivered; the finding was not
	r.close(t0.Add(time.Hour), decoy.WorkflowID)
	again := r.admit(t0.Add(2*time.Hour), s, alertOf("gd1", "guardduty:1:real", "critical", "ip:198.51.100.23"))
	if again.Kind != intake.OutcomeStarted {
		t.Errorf("the finding no model saw, sent again: %s (%s), want started", again.Kind, again.Message)
	}
	for _, id := range []string{"generic:id:decoy", "generic:id:decoy3", "generic:id:fill7"} {
		if o := r.admit(t0.Add(2*time.Hour), s, alertOf("x", id, "low")); o.Kind != intake.OutcomeRepeat {
			t.Errorf("%s, delivered, sent again: %s, want repeat", id, o.Kind)
		}
	}
}

// TestArrivalCutByTheBoundIsNoRepeat: an arrival cut by the queue bound
// when a failed start puts its batch back (bound) was never delivered
// either, so its identity is no repeat after the close.
func TestArrivalCutByTheBoundIsNoRepeat(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(10)
	first := r.admit(t0, s, alertOf("a0", "generic:id:a0", "low", "ip:203.0.113.1"))
	e := r.byWorkflow[first.WorkflowID]
	for i := range maxEntityQueue {
		r.admit(t0, s, alertOf(fmt.Sprintf("a%d", i+1), fmt.Sprintf("generic:id:a%d", i+1), "low", "ip:203.0.113.1"))
	}
	batch := r.take(e) // the start input
	r.admit(t0, s, alertOf("late", "generic:id:late", "high", "ip:203.0.113.1"))
	r.startFailed(t0, e, batch) // the batch goes back in front: "late" is cut
	if e.Dropped != 1 || slices.ContainsFunc(e.Queue, func(a investigation.Arrival) bool { return a.AlertID == "late" }) {
		t.Fatalf("late not cut: dropped %d, %d queued", e.Dropped, len(e.Queue))
	}
	r.take(e) // the next start delivers the 20
	r.close(t0.Add(time.Hour), e.WorkflowID)
	if o := r.admit(t0.Add(2*time.Hour), s, alertOf("late", "generic:id:late", "high")); o.Kind != intake.OutcomeStarted {
		t.Errorf("the cut alert, sent again: %s (%s), want started", o.Kind, o.Message)
	}
	if o := r.admit(t0.Add(2*time.Hour), s, alertOf("a5", "generic:id:a5", "low")); o.Kind != intake.OutcomeRepeat {
		t.Errorf("a delivered alert, sent again: %s, want repeat", o.Kind)
	}
}
