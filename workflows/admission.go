package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
)

// ia only names the intake's activity methods; the worker registers the
// real value.
var ia *activities.Intake

// AdmissionInput starts the admission workflow; continue-as-new hands the
// room over in it.
type AdmissionInput struct {
	Room *Room `json:"room,omitempty"`
}

// When the admission workflow continues as new, and how often it checks
// that the investigations it counts are still open.
const (
	admissionMaxEvents = 10000
	// admissionMaxAge: a run continues as new at least this often, so a
	// new worker version takes the waiting room over within it
	// (design/versioning.md) and an idle run's history stays short.
	admissionMaxAge = time.Hour
	checkEvery      = 5 * time.Minute
	maxChecked      = 200 // workflow IDs per check
)

// admissionMaxUpdates is how many updates a run takes before it continues
// as new (the server allows a few thousand per run); a variable for tests.
var admissionMaxUpdates = 500

// admission is one run of the admission workflow: the room plus what
// belongs to this run (work in flight, its one timer).
type admission struct {
	room     *Room
	changes  int // bumped by every handler, signal and finished activity
	updates  int
	inflight map[string]bool // workflow IDs with a start, a delivery or a check in flight
	checking bool
	started  time.Time // this run's start
	log      interface {
		Info(string, ...any)
		Warn(string, ...any)
	}
}

// IntakeAdmission is the one admission workflow of a task queue
// (intake.AdmissionID): every intake process sends it the alerts it took in
// (the admit update, in batches) and it decides, one alert after the
// other, what becomes of each: a new investigation (started when a slot is
// free, else waiting in severity order), news for the open investigation
// of its identity, a related alert for the open investigation of an entity
// it shares an indicator with, or a repeat. It starts investigations,
// delivers arrivals to them (the alerts signal), learns from them when they
// conclude and close, and holds the waiting room and the day's spend in
// its state, which continue-as-new carries. It never ends.
func IntakeAdmission(ctx workflow.Context, in AdmissionInput) error {
	ad := &admission{room: in.Room, inflight: map[string]bool{}, log: workflow.GetLogger(ctx), started: workflow.Now(ctx)}
	if ad.room == nil {
		ad.room = newRoom(workflow.Now(ctx))
	}
	ad.room.Settings = ad.room.Settings.WithDefaults()
	ad.room.index()
	// One gate for the run (it continues as new within the hour): a failed
	// start or run makes no repeats, a start that finds its run open hands
	// it the alerts, check results match the entity they described, shed
	// readmissions are kept. Recorded runs before it decide as they did.
	ad.room.fixed = workflow.GetVersion(ctx, "admission-outcomes", workflow.DefaultVersion, 1) == 1
	// Also one per run: an alert seen again at a higher severity that came
	// too late for its investigation is investigated again (Room.rises);
	// recorded runs before it dropped it.
	ad.room.rises = workflow.GetVersion(ctx, "late-rise-reinvestigated", workflow.DefaultVersion, 1) == 1
	// Also one per run: alerts a signal returns are checked as an admit
	// request's and bounded, a hand-back or another run's signal ends or
	// charges no entity, a shed reinvestigation stays one (Room.guards).
	ad.room.guards = workflow.GetVersion(ctx, "room-guards", workflow.DefaultVersion, 1) == 1
	if ad.room.guards {
		ad.room.trustCarried()
	}
	// Also one per run: an identity no model saw (its related alert
	// dropped past a queue's bound, reported unseen by its run's close,
	// or in an entity forgotten before its run closed) is no repeat
	// (Room.lost). Recorded runs before it made them repeats: replayed
	// without the gate, a later alert of such an identity is still one.
	ad.room.lost = workflow.GetVersion(ctx, "lost-no-repeat", workflow.DefaultVersion, 1) == 1
	// Also one per run: the room fails closed (Room.failClosed): a rise no
	// queue can take is shed, not reported delivered and later a repeat.
	ad.room.failClosed = workflow.GetVersion(ctx, "room-fails-closed", workflow.DefaultVersion, 1) == 1
	// Asked only for a report that splits its usage by model (Room.charge),
	// in this coroutine (receive): histories without one record no marker.
	ad.room.pricesParts = func() bool {
		return workflow.GetVersion(ctx, "usage-priced-by-model", workflow.DefaultVersion, 1) == 1
	}
	if err := ad.register(ctx); err != nil {
		return err
	}
	concluded := workflow.GetSignalChannel(ctx, investigation.ConcludedSignal)
	closed := workflow.GetSignalChannel(ctx, investigation.ClosedSignal)
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	var timer workflow.Future
	var timerAt time.Time
	for {
		now := workflow.Now(ctx)
		ad.receive(now, concluded, closed)
		ad.room.tick(now)
		if ad.room.fixed {
			ad.room.retryReadmits(now)
		}
		ad.room.schedule()
		info := workflow.GetInfo(ctx)
		if ad.updates >= admissionMaxUpdates || info.GetCurrentHistoryLength() >= admissionMaxEvents || info.GetContinueAsNewSuggested() ||
			!now.Before(ad.started.Add(admissionMaxAge)) {
			// Nothing new is launched: once what is in flight is done, the
			// room moves to a fresh run (starts and deliveries left go on there).
			if len(ad.inflight) == 0 && !ad.checking && workflow.AllHandlersFinished(ctx) && concluded.Len() == 0 && closed.Len() == 0 {
				cancelTimer()
				ad.log.Info("admission continues as new", "entities", len(ad.room.Entities), "closed", len(ad.room.Closed))
				// A pinned run (Worker Deployment Versioning) moves to the
				// current worker version here.
				return workflow.NewContinueAsNewErrorWithOptions(ctx,
					workflow.ContinueAsNewErrorOptions{InitialVersioningBehavior: workflow.ContinueAsNewVersioningBehaviorAutoUpgrade},
					intake.AdmissionWorkflowName, AdmissionInput{Room: ad.room})
			}
		} else {
			ad.startWaiting(ctx)
			ad.deliver(ctx)
			ad.check(ctx, now)
		}
		// One timer at a time, for the next thing that is due: a check, a
		// new day for held investigations, a closed identity to forget.
		if due := ad.due(now); !due.Equal(timerAt) {
			cancelTimer()
			timerCtx, cancelTimer = workflow.WithCancel(ctx)
			timerAt, timer = due, nil
			if !due.IsZero() {
				timer = workflow.NewTimerWithOptions(timerCtx, due.Sub(now), workflow.TimerOptions{Summary: "admission: next check, new day or continue-as-new"})
			}
		}
		seen := ad.changes
		if err := workflow.Await(ctx, func() bool {
			return ad.changes != seen || concluded.Len() > 0 || closed.Len() > 0 || (timer != nil && timer.IsReady())
		}); err != nil {
			return err
		}
		if timer != nil && timer.IsReady() {
			timerAt, timer = time.Time{}, nil
		}
	}
}

// register installs the admit and release updates and the status query.
func (ad *admission) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, intake.StatusQuery, func() (intake.Status, error) { return ad.room.status(), nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, intake.AdmitUpdate,
		func(ctx workflow.Context, req intake.AdmitRequest) (intake.AdmitResult, error) {
			ad.updates++
			ad.changes++
			now := workflow.Now(ctx)
			ad.room.tick(now)
			settings := req.Settings.WithDefaults()
			res := intake.AdmitResult{Outcomes: make([]intake.Outcome, 0, len(req.Alerts))}
			for _, al := range req.Alerts {
				o := ad.room.admit(now, settings, al)
				if o.Kind == intake.OutcomeShed {
					res.RetryAfter = investigation.Duration(shedRetry)
				}
				res.Outcomes = append(res.Outcomes, o)
			}
			return res, nil
		}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req intake.AdmitRequest) error { return req.Check() }}); err != nil {
		return err
	}
	return workflow.SetUpdateHandler(ctx, intake.ReleaseUpdate, func(ctx workflow.Context, rel intake.Release) (intake.Released, error) {
		ad.updates++
		ad.changes++
		return ad.room.release(rel), nil
	})
}

// receive applies the conclusions and closes that investigations signalled.
func (ad *admission) receive(now time.Time, concluded, closed workflow.ReceiveChannel) {
	var c investigation.Concluded
	for concluded.ReceiveAsync(&c) {
		ad.room.concluded(c)
		c = investigation.Concluded{}
	}
	var cl investigation.Closed
	for closed.ReceiveAsync(&cl) {
		ad.log.Info("investigation closed", "workflow_id", cl.WorkflowID, "reason", cl.Reason)
		ad.room.closed(now, cl)
		ad.room.handedBack(cl)
		// Only investigations with the late-arrivals gate
		// return alerts: older histories hold none. Related
		// alerts, and under the late-rise gate rises, come back.
		ad.room.readmit(now, cl.Returned.Arrivals)
		cl = investigation.Closed{}
	}
}

// startWaiting starts the investigations the room moved to starting, each
// in its own coroutine.
func (ad *admission) startWaiting(ctx workflow.Context) {
	for _, e := range ad.room.Entities {
		if e.State != intake.StateStarting || ad.inflight[e.WorkflowID] {
			continue
		}
		ad.inflight[e.WorkflowID] = true
		in := ad.startInput(ctx, e)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer func() { delete(ad.inflight, e.WorkflowID); ad.changes++ }()
			var out activities.StartOutput
			err := workflow.ExecuteActivity(storeOptions(ctx, clip.String("start "+e.WorkflowID, 200)), ia.StartInvestigation, in).Get(ctx, &out)
			fixed := ad.room.fixed
			if ad.room.guards && ad.room.byWorkflow[e.WorkflowID] != e {
				// e ended while its start was in flight (its run, started by
				// an attempt whose answer was lost, said it closed): the answer
				// is not about a newer entity of the ID, which starts once this
				// is done (the deferred delete lets startWaiting see it).
				ad.log.Info("a start answered after its entity ended; ignored", "workflow_id", e.WorkflowID)
				return
			}
			switch {
			case err != nil && fixed:
				ad.log.Warn("could not start an investigation; it waits and is tried again", "workflow_id", e.WorkflowID, "error", err)
				ad.room.startFailed(workflow.Now(ctx), e, in.Input.Intake.Arrived)
			case err != nil:
				ad.log.Warn("could not start an investigation", "workflow_id", e.WorkflowID, "error", err)
				ad.room.close(workflow.Now(ctx), e.WorkflowID)
			case out.Outcome == activities.StartRepeat:
				ad.room.Counters.Repeats++
				if fixed {
					// Its related alerts were never investigated: the close
					// admits them again, each on its own.
					ad.room.requeue(e, in.Input.Intake.Arrived)
				}
				ad.room.close(workflow.Now(ctx), e.WorkflowID)
			case out.Outcome == activities.StartRunning && fixed && ad.room.closingRun(out.Session):
				// The run open is the one that told us it closed: it is only
				// finishing (flush, hand-back), and attached to it the alerts
				// would be lost. It waits, as a failed start does. No gate:
				// only StartInvestigation results carrying Session reach this,
				// and no recorded one does (the field is new).
				ad.log.Info("the identity's last run is still closing; the start waits and is tried again", "workflow_id", e.WorkflowID)
				ad.room.startFailed(workflow.Now(ctx), e, in.Input.Intake.Arrived)
			case out.Outcome == activities.StartRunning && fixed:
				ad.room.attached(e, in.Input.Intake.Arrived, out.Session)
			case out.Outcome == activities.StartStarted && out.Found && fixed:
				// An earlier round made the run (its answer lost) and this one
				// started nothing: this input reached no run. No gate: only
				// results carrying Found reach this, and no recorded one does.
				ad.room.Counters.Started++ // that round's run: its round failed, and counted nothing
				ad.room.resumed(e, in.Input.Intake.Arrived)
			default:
				if out.Outcome == activities.StartStarted {
					ad.room.Counters.Started++ // once (Room.Counters)
				}
				ad.room.started(e.WorkflowID)
			}
		})
	}
}

// startInput is what starts an entity's investigation: its first alert and
// what arrived while it waited.
func (ad *admission) startInput(ctx workflow.Context, e *Entity) activities.StartInput {
	s := ad.room.Settings
	return activities.StartInput{
		WorkflowID: e.WorkflowID, Severity: e.Severity, Admitted: e.Admitted,
		Reinvestigate: e.Reinvestigate, RepeatWindow: s.RepeatWindow, Traceparent: e.Traceparent,
		Summary: fmt.Sprintf("Investigate %s (%s, intake): %s", e.AlertID, e.Severity, e.Title),
		Input: investigation.Input{
			AlertID:     e.AlertID,
			IdleTimeout: s.IdleTimeout,
			// An activity's input, which replay does not compare; zero (every
			// recorded room's settings) is the 24 h default, as before: no gate.
			Limits: investigation.Limits{ApprovalTimeout: s.ApprovalTimeout},
			Intake: &investigation.IntakeInput{
				Identity: e.Identity, Admission: workflow.GetInfo(ctx).WorkflowExecution.ID,
				Delivery: s.Delivery, Arrived: ad.room.take(e),
			},
		},
	}
}

// deliver signals the arrivals queued for running and concluded
// investigations, one signal per investigation at a time. A signal that
// cannot reach its investigation (it closed) closes the entity; the
// related alerts it held get investigations of their own.
func (ad *admission) deliver(ctx workflow.Context) {
	for _, e := range ad.room.Entities {
		if (e.State != intake.StateRunning && e.State != intake.StateConcluded) || len(e.Queue) == 0 || ad.inflight[e.WorkflowID] {
			continue
		}
		ad.inflight[e.WorkflowID] = true
		batch := ad.room.takeToDeliver(e)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer func() { delete(ad.inflight, e.WorkflowID); ad.changes++ }()
			err := workflow.SignalExternalWorkflow(ctx, e.WorkflowID, "", investigation.AlertsUpdate, batch).Get(ctx, nil)
			if err == nil {
				return
			}
			ad.log.Info("could not deliver arrivals; the investigation closed", "workflow_id", e.WorkflowID, "error", err)
			if !ad.room.requeue(e, batch) {
				// Its close was received first and took only what was
				// queued; histories recorded before the gate dropped these.
				if workflow.GetVersion(ctx, "readmit-after-close", workflow.DefaultVersion, 1) == 1 {
					ad.room.readmit(workflow.Now(ctx), batch.Arrivals)
				}
				return
			}
			// Its run closed without telling us how: under the gate its
			// identities are no repeats (StartIntake still finds a completed run).
			ad.room.end(workflow.Now(ctx), e.WorkflowID, !ad.room.fixed)
		})
	}
}

// takeToDeliver takes the arrivals queued for e's open investigation, to
// be signalled, marked OverBudget when followUpHeld.
func (r *Room) takeToDeliver(e *Entity) investigation.ArrivalBatch {
	b := r.take(e)
	b.OverBudget = r.followUpHeld(e, b)
	return b
}

// followUpHeld says whether arrivals delivered to e's investigation are
// held by the day's budget: it is reached (or cannot be kept) and neither
// an arrival nor the entity is critical, nor released, as held lets a
// start through. Their follow-up would spend past the ceiling, outside
// --max-running (investigation.ArrivalBatch.OverBudget). Only the
// signal's payload changes, which replay does not compare: no gate.
func (r *Room) followUpHeld(e *Entity, b investigation.ArrivalBatch) bool {
	if !r.overBudget() || e.Severity == alerts.SeverityCritical || e.Released {
		return false
	}
	return !slices.ContainsFunc(b.Arrivals, func(a investigation.Arrival) bool { return a.Severity == alerts.SeverityCritical })
}

// check asks, every checkEvery, whether the investigations the room counts
// are still open: one that ended without saying so (terminated, timed out)
// must not hold its slot for ever.
func (ad *admission) check(ctx workflow.Context, now time.Time) {
	if ad.checking || now.Before(ad.room.NextCheck) {
		return
	}
	ids, seqs := ad.room.toCheck(ad.inflight)
	ad.room.NextCheck = now.Add(checkEvery)
	if len(ids) == 0 {
		return
	}
	ad.checking = true
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { ad.checking = false; ad.changes++ }()
		var out activities.CheckOutput
		if err := workflow.ExecuteActivity(checkOptions(ctx), ia.CheckInvestigations, activities.CheckInput{WorkflowIDs: ids}).Get(ctx, &out); err != nil {
			ad.log.Warn("could not check the open investigations", "error", err)
			return
		}
		for _, id := range out.Closed {
			if !ad.room.fixed {
				ad.room.close(workflow.Now(ctx), id)
				continue
			}
			// Only the entity the check described; it ended without saying
			// how (terminated, timed out), so its identities are no repeats
			// (StartIntake still finds a run that completed).
			if e := ad.room.byWorkflow[id]; e != nil && e.Seq == seqs[id] {
				ad.room.end(workflow.Now(ctx), id, false)
			}
		}
	})
}

// checkOptions are the options of CheckInvestigations, which describes up
// to maxChecked runs one after another. It heartbeats like every activity
// (activities.Heartbeats): an attempt on a killed worker is tried again
// within heartbeatTimeout, not after its minute. No gate: replay matches a
// scheduled activity by ID and type only.
func checkOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:       heartbeatTimeout,
		Summary:                "check open investigations",
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 5 * time.Second},
	})
}

// due is when the loop must run again without news: the run's time to
// continue as new, the next check (while investigations are open), the
// next UTC day (while the budget holds some back), the next closed
// identity to forget.
func (ad *admission) due(now time.Time) time.Time {
	next := ad.started.Add(admissionMaxAge)
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, e := range ad.room.Entities {
		if e.State != intake.StateWaiting {
			earliest(ad.room.NextCheck)
		}
		if e.State == intake.StateWaiting && e.RetryAt.After(now) {
			earliest(e.RetryAt)
		}
		if ad.room.held(e) {
			y, m, d := now.UTC().Date()
			earliest(time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC))
		}
	}
	if len(ad.room.Closed) > 0 {
		earliest(ad.room.Closed[0].At.Add(ad.room.Settings.RepeatWindow.Duration()))
	}
	if !next.IsZero() && !next.After(now) {
		next = now.Add(time.Second)
	}
	return next
}
