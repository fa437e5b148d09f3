package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/secops-agent/investigator/internal/clip"
)

// maxPayload is Temporal's default limit on one payload (blob size).
const maxPayload = 2 << 20

// report turns the measurements into rows; nothing is estimated: a figure
// whose runs failed is n/a with the reason.
func (b *bench) report(m *measurements) *report {
	lats := make([]string, len(b.o.latencies))
	for i, l := range b.o.latencies {
		lats[i] = l.String()
	}
	ns := make([]string, len(b.o.batches))
	for i, n := range b.o.batches {
		ns[i] = fmt.Sprint(n)
	}
	server := "Temporal dev server (SQLite file, as the local stack runs it)"
	switch {
	case b.o.cluster:
		server = "the local cluster (PostgreSQL; frontend, history, matching, internal worker)"
	case b.o.memoryServer:
		server = "Temporal dev server (in memory)"
	}
	rep := &report{
		Date: time.Now().Format("2006-01-02"),
		Settings: fmt.Sprintf("%s; model latency %s; provider latency %s; batches of %s; %d worker process(es); %s",
			server, strings.Join(lats, ", "), b.o.providerLatency, strings.Join(ns, ", "), b.o.workers, machine()),
	}
	for i := range b.o.latencies {
		rep.Rows = append(rep.Rows, b.overheadRows(m.lone[i], b.o.latencies[i])...)
	}
	rep.Rows = append(rep.Rows, b.parallelCallsRow(m), parallelStepsRow(m))
	lone, loneErr := loneWall(m.lone[b.o.batchLatency()])
	for _, bt := range m.batches {
		rep.Rows = append(rep.Rows, batchRows(bt, b.o.latencies[b.o.batchLatency()], lone, loneErr)...)
	}
	rep.Rows = append(rep.Rows, starterRows(m, b.o.latencies[0])...)
	if m.scale != nil {
		for i := range m.scale.one {
			rep.Rows = append(rep.Rows, scaleRows(m.scale.one[i], m.scale.all[i], m.scale.workers, b.o.latencies[b.o.batchLatency()])...)
		}
	}
	rep.Rows = append(rep.Rows, historyRows(m.lone[0][0], m.historyRuns)...)
	split := m
	if m.scale != nil {
		// On the cluster: the split of the batches run with every worker.
		all := *m
		all.historyRuns = nil
		for _, bt := range m.scale.all {
			all.historyRuns = append(all.historyRuns, bt.runs...)
		}
		split = &all
	}
	rep.Rows = append(rep.Rows, promptRow(m.lone[0][0]), storeRow(m.lone[0], m.firestore), b.splitRow(split))
	rep.Notes = notes
	return rep
}

var notes = []string{
	"Every figure comes from this run: a warm-up investigation first (not counted), then -repeat rounds, each running the standard investigation (a plan; a step reading the alert with get_alert; a step searching earlier alerts for its IP with search_alerts; 8 model calls, 2 tool calls on the alert store) alone at each model latency and the scenario pairs (intel lookups at the provider latency) at the first latency, then the batches. A repeated figure is the median run's, with the range.",
	"overhead: wall time from the start request to the Conclude activity's completion in the history (the server and the bench share this machine's clock) ÷ the time during which the model server had at least one request of the run open (union of request→reply intervals); what is left is the workflow's own time and the two store-backed tool calls.",
	"starter investigate overhead: what an analyst sees, the wall time of the `starter investigate` process (start → exit after the conclusion is printed, the starter's own start-up, alert check, start request and following included) ÷ the time its run had a model request open; first: the very first investigation after the stack (the Temporal server, the emulator) and the workers started, before the warm-up; warm: one per repeat; after a worker restart: once the repeats ran, every running worker stopped (SIGTERM) and as many new processes started, as a deploy does, so no warm worker takes part; the first investigation after that, the servers warm.",
	"schedule→start: ActivityTaskScheduled → ActivityTaskStarted event times; start→model call: ActivityTaskStarted → the model server receiving the request; model reply→completion: the reply written → ActivityTaskCompleted. Model activities are matched to model requests in order; medians over every repeat.",
	"parallel calls: time with at least one lookup in flight at the fake providers (request arrived → answered; the lookups run as local activities, whose history has no times) when one turn asks for three lookups ÷ the same when three turns ask for one each.",
	"parallel steps: the executing phase (plan completed → conclusion scheduled) of a plan whose steps say depends_on: [] ÷ the same plan without it; n/a while both runs keep at most one model turn in flight, i.e. the workflow runs independent steps in order.",
	"concurrency: N standard investigations started at once at the longest model latency (a real model's seconds are what let runs overlap); wall time as in overhead ÷ the lone run's; CPU: utime+stime of the worker process(es), and of the dev server and the emulator's JVM (the bench's descendants named temporal and java), from /proc/PID/stat over the batch ÷ N; peak RSS: VmHWM from /proc/PID/status, reset through /proc/PID/clear_refs before each batch.",
	"history: the first lone run at the first latency; bytes are the history's protobuf size; per tool call counts the CallTool activities' own events (a local activity's one marker, an activity's scheduled, started and closed events); the largest payload is the largest Payload message in any history this run read.",
	"prompt bytes: request bodies the model server received ÷ what a naive agent re-sending the whole transcript would send: each model call's body, less the step transcript it carried, plus every model turn and tool result of the investigation before it (JSON bytes).",
	"store round trips: the worker reaches the Firestore emulator through a TCP proxy that reads the client side of each HTTP/2 connection and counts HEADERS frames opening a new stream, one per gRPC call (a streamed call such as RunQuery or BatchGetDocuments counts once); the emulator offers no request log or counter (none of its flags or endpoints); the method of each call is the :path of its header block, decoded with HPACK. The figure counts the worker's durable state (transcript entries, progress events and status, alert reads its cache missed), leaving out the queries the search_alerts tool makes as its work. Lone runs at the first latency.",
	"cluster (-cluster): the Temporal server is the local cluster's (cmd/stack's cluster-server profile: PostgreSQL and the frontend, history, matching and internal-worker processes); its CPU is each service's process group and descendants (PostgreSQL's backends), from /proc; the batches run with one worker, then again once the other workers poll, and the 2-workers-÷-1 rows compare the two (throughput: concluded ÷ the batch's wall time).",
	"scale-out: the worker that started each activity, from ActivityTaskStarted's identity (pid@host), over every run (local activities, run in their workflow task's worker, left out); worker N's replacement after the restart counts as worker N.",
}

// starterRows are the overhead an analyst sees: `starter investigate`'s
// wall time ÷ the time a model call of its run was in flight, for the
// first run after the worker started and once warm.
func starterRows(m *measurements, lat time.Duration) []row {
	at := " @" + lat.String()
	one := func(name string, rs []*starterRun, how string) row {
		ratios := make([]float64, len(rs))
		busy := make([]time.Duration, len(rs))
		for i, r := range rs {
			if r == nil {
				return na(name, "not run", "")
			}
			if r.err != nil {
				return na(name, why(r.err), "")
			}
			busy[i] = union(callSpans(r.trace.snapshot()))
			if busy[i] <= 0 {
				return na(name, "no model time to divide by", "")
			}
			ratios[i] = float64(r.wall) / float64(busy[i])
		}
		mid, sp := medianOf(ratios)
		return figure(name, ratios[mid], unitRatio, fmt.Sprintf("starter process %s ÷ model in flight %s (%d model requests)%s%s",
			dur(rs[mid].wall), dur(busy[mid]), len(rs[mid].trace.snapshot()), sp, how))
	}
	return []row{
		one("starter investigate overhead"+at+", first run after worker start", []*starterRun{m.starterFirst}, ""),
		one("starter investigate overhead"+at+", warm", m.starterWarm, ""),
		one("starter investigate overhead"+at+", first run after a worker restart", []*starterRun{m.starterRestart},
			fmt.Sprintf("; every worker restarted (%s stopped, as many started), as a deploy does", plural(m.restarted, "worker"))),
	}
}

func why(err error) string { return clip.String(firstLine(err.Error()), 160) }

func (b *bench) overheadRows(rs []*run, lat time.Duration) []row {
	at := " @" + lat.String()
	names := []string{"overhead" + at, "schedule→start median" + at, "start→model call median" + at, "model reply→completion median" + at}
	if err := failed(rs...); err != nil {
		return naAll(names, why(err))
	}
	busy, ratios := make([]time.Duration, len(rs)), make([]float64, len(rs))
	for i, r := range rs {
		busy[i] = union(callSpans(r.trace.snapshot()))
		if busy[i] <= 0 {
			return naAll(names, "no model time to divide by")
		}
		ratios[i] = float64(r.wall) / float64(busy[i])
	}
	mid, sp := medianOf(ratios)
	rows := []row{figure(names[0], ratios[mid], unitRatio, fmt.Sprintf("wall %s ÷ model in flight %s (%d model requests, %d tool calls)%s",
		dur(rs[mid].wall), dur(busy[mid]), len(rs[mid].trace.snapshot()), len(rs[mid].hist.ofType(isTool)), sp))}
	var sched, toCall, toDone, toolSched []time.Duration
	for _, r := range rs {
		calls := r.trace.snapshot()
		acts := r.hist.ofType((*activity).model)
		if len(acts) != len(calls) {
			return append(rows, naAll(names[1:], fmt.Sprintf("%s: %d model activities but %d model requests", r.id, len(acts), len(calls)))...)
		}
		for i, a := range acts {
			sched = append(sched, a.started.Sub(a.scheduled))
			toCall = append(toCall, calls[i].span.start.Sub(a.started))
			toDone = append(toDone, a.closed.Sub(calls[i].span.end))
		}
		for _, a := range r.hist.ofType(isTool) {
			if !a.local {
				toolSched = append(toolSched, a.started.Sub(a.scheduled))
			}
		}
	}
	for i, ds := range [][]time.Duration{sched, toCall, toDone} {
		med, _ := median(ds)
		detail := fmt.Sprintf("median of %d model activities", len(ds))
		if lat > 0 {
			detail += fmt.Sprintf(" = %.3f× the model latency", float64(med)/float64(lat))
		}
		if t, ok := median(toolSched); ok && i == 0 {
			detail += fmt.Sprintf("; tool activities %s", dur(t))
		}
		rows = append(rows, figure(names[i+1], ms(med), unitMs, detail))
	}
	return rows
}

func callSpans(calls []modelCall) []interval {
	ivs := make([]interval, len(calls))
	for i, c := range calls {
		ivs[i] = c.span
	}
	return ivs
}

// medianOf returns the index of the median value (the lower one of an even
// count) and, for more than one value, their range as text.
func medianOf(v []float64) (int, string) {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(v[a], v[b]) })
	if len(v) < 2 {
		return idx[0], ""
	}
	return idx[(len(v)-1)/2], fmt.Sprintf("; median of %d runs, range %.2f–%.2f", len(v), v[idx[0]], v[idx[len(v)-1]])
}

func naAll(names []string, reason string) []row {
	rows := make([]row, len(names))
	for i, n := range names {
		rows[i] = na(n, reason, "")
	}
	return rows
}

func failed(rs ...*run) error {
	for _, r := range rs {
		if !r.ok() {
			return r.err
		}
	}
	return nil
}

func isTool(a *activity) bool { return a.typ == actTool }
func isTurn(a *activity) bool { return a.typ == actTurn }

func (b *bench) parallelCallsRow(m *measurements) row {
	const name = "parallel calls: 3 in one turn ÷ 3 turns of one"
	if err := failed(append(slices.Clone(m.callsPar), m.callsSeq...)...); err != nil {
		return na(name, why(err), "")
	}
	par, seq, ratios := make([]time.Duration, len(m.callsPar)), make([]time.Duration, len(m.callsPar)), make([]float64, len(m.callsPar))
	for i := range m.callsPar {
		par[i] = union(b.s.intel.spans(m.callsPar[i].start, m.callsPar[i].start.Add(m.callsPar[i].wall)))
		seq[i] = union(b.s.intel.spans(m.callsSeq[i].start, m.callsSeq[i].start.Add(m.callsSeq[i].wall)))
		ratios[i] = float64(par[i]) / float64(seq[i])
	}
	mid, sp := medianOf(ratios)
	return figure(name, ratios[mid], unitRatio,
		fmt.Sprintf("tools in flight %s ÷ %s (lookups of %s each)%s", dur(par[mid]), dur(seq[mid]), b.o.providerLatency, sp))
}

func parallelStepsRow(m *measurements) row {
	const name = "parallel steps: 3 independent ÷ in order"
	if err := failed(append(slices.Clone(m.stepsPar), m.stepsSeq...)...); err != nil {
		return na(name, why(err), "")
	}
	n := len(m.stepsPar)
	par, seq, ratios := make([]time.Duration, n), make([]time.Duration, n), make([]float64, n)
	overlap := 0
	for i := range n {
		par[i], seq[i] = executing(m.stepsPar[i].hist), executing(m.stepsSeq[i].hist)
		if seq[i] <= 0 {
			return na(name, "the in-order run has no executing phase", "")
		}
		ratios[i] = float64(par[i]) / float64(seq[i])
		overlap = max(overlap, maxOverlap(spans(m.stepsPar[i].hist.ofType(isTurn))), maxOverlap(spans(m.stepsSeq[i].hist.ofType(isTurn))))
	}
	mid, sp := medianOf(ratios)
	detail := fmt.Sprintf("executing %s with depends_on: [] vs %s without%s", dur(par[mid]), dur(seq[mid]), sp)
	if overlap <= 1 {
		return na(name, "steps run in order", "same shape: one model turn in flight at a time in both; "+detail)
	}
	return figure(name, ratios[mid], unitRatio, detail+fmt.Sprintf("; up to %d model turns in flight", overlap))
}

// executing is plan completed → conclusion scheduled.
func executing(h histInfo) time.Duration {
	var from, to time.Time
	for _, a := range h.activities {
		if a.typ == actPlan && a.completed {
			from = a.closed
		}
		if a.typ == actConclude {
			to = a.scheduled
		}
	}
	if from.IsZero() || to.IsZero() {
		return 0
	}
	return to.Sub(from)
}

// loneWall is the median wall time of the lone runs, or the first failure.
func loneWall(rs []*run) (time.Duration, error) {
	if err := failed(rs...); err != nil {
		return 0, err
	}
	walls := make([]time.Duration, len(rs))
	for i, r := range rs {
		walls[i] = r.wall
	}
	w, _ := median(walls)
	return w, nil
}

func batchRows(bt *batch, lat, lone time.Duration, loneErr error) []row {
	p := fmt.Sprintf("n=%d @%s: ", bt.n, lat)
	names := []string{p + "completed", p + "p50 wall ÷ lone", p + "p95 wall ÷ lone", p + "worker CPU per investigation", p + "server CPU per investigation", p + "worker peak RSS"}
	var walls []time.Duration
	var firstErr error
	for _, r := range bt.runs {
		if r.ok() {
			walls = append(walls, r.wall)
		} else if firstErr == nil {
			firstErr = r.err
		}
	}
	detail := fmt.Sprintf("%d of %d concluded; the batch took %s", len(walls), bt.n, dur(bt.elapsed))
	if firstErr != nil {
		detail += "; first failure: " + why(firstErr)
	}
	rows := []row{figure(names[0], 100*float64(len(walls))/float64(bt.n), unitPct, detail)}
	for i, pc := range []float64{50, 95} {
		w, ok := percentile(walls, pc)
		switch {
		case !ok:
			rows = append(rows, na(names[1+i], "no investigation of the batch concluded", ""))
		case len(walls) < bt.n:
			// A percentile of the concluded runs alone would leave out the
			// slowest ones (those that never ended) and flatter the batch.
			rows = append(rows, na(names[1+i], fmt.Sprintf("%d of %d investigations did not conclude", bt.n-len(walls), bt.n), ""))
		case loneErr != nil:
			rows = append(rows, na(names[1+i], "the lone run failed: "+why(loneErr), ""))
		default:
			rows = append(rows, figure(names[1+i], float64(w)/float64(lone), unitRatio, fmt.Sprintf("%s ÷ %s (the median lone run)", dur(w), dur(lone))))
		}
	}
	if bt.cpuErr != nil {
		rows = append(rows, na(names[3], why(bt.cpuErr), ""))
	} else {
		rows = append(rows, figure(names[3], bt.cpu/float64(bt.n), unitSec, fmt.Sprintf("%.2f CPU-s over the batch ÷ %d", bt.cpu, bt.n)))
	}
	tc, fc := bt.servers["temporal"], bt.servers["java"]
	if cl := clusterCPU(bt); cl > 0 {
		rows = append(rows, figure(names[4], (cl+fc)/float64(bt.n), unitSec, fmt.Sprintf("cluster %s + Firestore emulator %.3f s", clusterSplit(bt), fc/float64(bt.n))))
	} else if tc+fc > 0 {
		rows = append(rows, figure(names[4], (tc+fc)/float64(bt.n), unitSec, fmt.Sprintf("Temporal dev server %.3f s + Firestore emulator %.3f s", tc/float64(bt.n), fc/float64(bt.n))))
	} else {
		rows = append(rows, na(names[4], "no CPU time read for the dev server or the emulator", ""))
	}
	if bt.rssErr != nil {
		rows = append(rows, na(names[5], why(bt.rssErr), ""))
	} else {
		per := float64(bt.peakKiB-bt.idleKiB) * 1024 / float64(bt.n)
		rows = append(rows, figure(names[5], float64(bt.peakKiB)/1024, unitMiB,
			fmt.Sprintf("%s before the batch; (peak − that) ÷ %d = %s per investigation", kib(float64(bt.idleKiB)*1024), bt.n, kib(per))))
	}
	return rows
}

func historyRows(r *run, all []*run) []row {
	names := []string{"history events per investigation", "history events per tool call", "history bytes per investigation", "history bytes per tool call", "largest payload in any history"}
	var rows []row
	if !r.ok() {
		rows = naAll(names[:4], why(r.err))
	} else {
		tools := r.hist.ofType(isTool)
		ev, by, local := 0, 0, 0
		for _, a := range tools {
			ev += a.events
			by += a.bytes
			local += btoi(a.local)
		}
		own := fmt.Sprintf("the %d CallTool activities (%d of them local activities, one marker each)", len(tools), local)
		n := float64(len(tools))
		rows = append(rows,
			figure(names[0], float64(r.hist.events), unitCount, fmt.Sprintf("%d tool calls, %d model calls%s", len(tools), len(r.hist.ofType((*activity).model)), others(r.hist))),
			figure(names[1], float64(ev)/n, unitCount, fmt.Sprintf("%d events of %s", ev, own)),
			figure(names[2], float64(r.hist.bytes)/1024, unitKiB, "protobuf size"),
			figure(names[3], float64(by)/n/1024, unitKiB, fmt.Sprintf("%s in the events of %s", kib(float64(by)), own)))
	}
	largest, read := 0, 0
	for _, h := range all {
		if h.ok() {
			largest, read = max(largest, h.hist.largestPayload), read+1
		}
	}
	if read == 0 {
		return append(rows, na(names[4], "no history was read", ""))
	}
	return append(rows, figure(names[4], float64(largest)/1024, unitKiB,
		fmt.Sprintf("÷ the 2 MiB payload limit = %.4f; over %d histories", float64(largest)/maxPayload, read)))
}

// others names the activities that are neither a model nor a tool call
// (the workflow's store writes, the catalog), by type.
func others(h histInfo) string {
	n := map[string]int{}
	for _, a := range h.ofType(func(a *activity) bool { return !a.model() && !isTool(a) }) {
		n[a.typ]++
	}
	if len(n) == 0 {
		return ""
	}
	var parts []string
	for _, typ := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s %d", typ, n[typ]))
	}
	return "; other activities: " + strings.Join(parts, ", ")
}

func promptRow(r *run) row {
	const name = "prompt bytes ÷ whole-transcript baseline"
	if !r.ok() {
		return na(name, why(r.err), "")
	}
	sent, naive := 0, 0
	calls := r.trace.snapshot()
	for _, c := range calls {
		sent += c.bytes
		naive += c.bytes - c.carried + c.whole
	}
	return figure(name, float64(sent)/float64(naive), unitRatio,
		fmt.Sprintf("%s ÷ %s per investigation (%d model calls)", kib(float64(sent)), kib(float64(naive)), len(calls)))
}

// storeQueries are the Firestore methods of the tools' own work (a
// search_alerts query), left out of the durability figure.
var storeQueries = []string{"RunQuery", "RunAggregationQuery"}

func storeRow(rs []*run, fsCalls []callCount) row {
	const name = "store round trips per model call"
	if err := failed(rs...); err != nil {
		return na(name, why(err), "")
	}
	all := callCount{}
	calls, tools := 0, 0
	for i, r := range rs {
		for m, n := range fsCalls[i] {
			all[m] += n
		}
		calls += len(r.trace.snapshot())
		tools += len(r.hist.ofType(isTool))
	}
	var queries int64
	for _, m := range storeQueries {
		queries += all[m]
	}
	methods := slices.Sorted(maps.Keys(all))
	byMethod := make([]string, len(methods))
	for i, m := range methods {
		byMethod[i] = fmt.Sprintf("%s %d", m, all[m])
	}
	return figure(name, float64(all.total()-queries)/float64(calls), unitCount,
		fmt.Sprintf("%d Firestore calls ÷ %d model calls (with %d tool calls) over %s, the tools' own queries (%s) left out; every call: %s",
			all.total()-queries, calls, tools, plural(len(rs), "run"), strings.Join(storeQueries, ", "), strings.Join(byMethod, ", ")))
}

func (b *bench) splitRow(m *measurements) row {
	const name = "scale-out: busiest worker's share of activities"
	if len(b.s.workers) < 2 {
		return na(name, "one worker", "-workers 2 runs two and reports the split")
	}
	counts := make([]int, len(b.s.workers))
	total, other := 0, 0
	for _, r := range m.historyRuns {
		if !r.ok() {
			continue
		}
		for _, a := range r.hist.activities {
			if a.local {
				continue // run by the worker of its workflow task, which history does not name
			}
			total++
			i, ok := b.s.workerOf(a.identity)
			if !ok {
				other++
				continue
			}
			counts[i]++
		}
	}
	if total == 0 {
		return na(name, "no history was read", "")
	}
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprintf("worker %d: %d (%.0f%%)", i+1, c, 100*float64(c)/float64(total))
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("unknown: %d", other))
	}
	return figure(name, 100*float64(slices.Max(counts))/float64(total), unitPct, strings.Join(parts, ", "))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// clusterCPU is the cluster's CPU time over a batch (0 off the cluster).
func clusterCPU(bt *batch) float64 {
	sum := 0.0
	for _, name := range clusterServices {
		sum += bt.servers[name]
	}
	return sum
}

// clusterSplit names each cluster service's CPU per investigation.
func clusterSplit(bt *batch) string {
	var parts []string
	for _, name := range clusterServices {
		parts = append(parts, fmt.Sprintf("%s %.3f s", strings.TrimPrefix(name, "temporal-"), bt.servers[name]/float64(bt.n)))
	}
	return strings.Join(parts, ", ")
}

// scaleRows compare a batch run with one worker and with all of them, on
// the cluster: throughput (concluded per second over the batch) and p95
// wall time, each as all ÷ one.
func scaleRows(one, all *batch, workers int, lat time.Duration) []row {
	p := fmt.Sprintf("cluster n=%d @%s, %d workers ÷ 1: ", one.n, lat, workers)
	concluded := func(bt *batch) (int, []time.Duration) {
		var walls []time.Duration
		for _, r := range bt.runs {
			if r.ok() {
				walls = append(walls, r.wall)
			}
		}
		return len(walls), walls
	}
	n1, w1 := concluded(one)
	n2, w2 := concluded(all)
	if n1 < one.n || n2 < all.n {
		// Throughput and p95 over the concluded runs alone would flatter a
		// batch whose slowest runs never ended.
		return naAll([]string{p + "throughput", p + "p95 wall", p + "worker CPU per investigation"}, fmt.Sprintf("not every investigation concluded (%d of %d with one worker, %d of %d with %d)", n1, one.n, n2, all.n, workers))
	}
	t1, t2 := float64(n1)/one.elapsed.Seconds(), float64(n2)/all.elapsed.Seconds()
	q1, _ := percentile(w1, 95)
	q2, _ := percentile(w2, 95)
	rows := []row{
		figure(p+"throughput", t2/t1, unitRatio, fmt.Sprintf("%.2f ÷ %.2f investigations/s (%d in %s; %d in %s)", t2, t1, n2, dur(all.elapsed), n1, dur(one.elapsed))),
		figure(p+"p95 wall", float64(q2)/float64(q1), unitRatio, fmt.Sprintf("%s ÷ %s", dur(q2), dur(q1))),
		figure(p+"worker CPU per investigation", (all.cpu/float64(all.n))/(one.cpu/float64(one.n)), unitRatio,
			fmt.Sprintf("%.3f s ÷ %.3f s; cluster per investigation with %d: %s; with 1: %s", all.cpu/float64(all.n), one.cpu/float64(one.n), workers, clusterSplit(all), clusterSplit(one))),
	}
	if err := errors.Join(one.cpuErr, all.cpuErr); err != nil {
		rows[2] = na(p+"worker CPU per investigation", why(err), "")
	}
	return rows
}
