package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

const pollInterval = 400 * time.Millisecond

// follow prints an investigation's progress events as they happen (polling
// the progress query from the last event seen, so nothing is missed or
// repeated) until the workflow closes, then its conclusion or failure.
func follow(ctx context.Context, c client.Client, run client.WorkflowRun, queue string, out io.Writer) error {
	type outcome struct {
		res investigation.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		o.err = run.Get(ctx, &o.res)
		done <- o
	}()
	p := &printer{out: out}
	warned := false
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(out, "\nStopped following. The investigation goes on: %s\n", run.GetID())
			return ctx.Err()
		case o := <-done:
			p.poll(ctx, c, run) // the last events, conclusion included
			if o.err != nil {
				return fmt.Errorf("investigation %s failed: %s", run.GetID(), failureMessage(o.err))
			}
			if !p.concluded {
				p.conclusion(o.res.Conclusion)
			}
			fmt.Fprintf(out, "\n%d steps, %d tool calls, %d model calls (%d prompt + %d output tokens)\n",
				o.res.Plan.Count(plan.Done), o.res.ToolCalls, o.res.Usage.Calls, o.res.Usage.PromptTokens, o.res.Usage.OutputTokens)
			return nil
		case <-tick.C:
			if err := p.poll(ctx, c, run); err != nil && !warned && p.seq == 0 {
				warned = true
				fmt.Fprintf(out, "(waiting for a worker on task queue %q...)\n", queue)
			}
		}
	}
}

type printer struct {
	out       io.Writer
	seq       int
	concluded bool
}

func (p *printer) poll(ctx context.Context, c client.Client, run client.WorkflowRun) error {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(qctx, run.GetID(), run.GetRunID(), investigation.ProgressQuery, p.seq)
	if err != nil {
		return err
	}
	var events []investigation.Event
	if err := v.Get(&events); err != nil {
		return err
	}
	for _, e := range events {
		if e.Seq != p.seq+1 {
			continue
		}
		p.seq = e.Seq
		p.print(e)
	}
	return nil
}

func (p *printer) print(e investigation.Event) {
	w := p.out
	switch e.Kind {
	case investigation.EventPlan:
		fmt.Fprintf(w, "PLAN  %s\n", e.Plan.Objective)
		for _, s := range e.Plan.Steps {
			tools := strings.Join(s.Tools, ", ")
			if tools == "" {
				tools = "no tools"
			}
			fmt.Fprintf(w, "  %s  %s [%s]\n", s.ID, s.Description, tools)
			if s.Expected != "" {
				fmt.Fprintf(w, "          expect: %s\n", s.Expected)
			}
		}
		for _, n := range e.Items {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	case investigation.EventStep:
		fmt.Fprintf(w, "\nSTEP  %s: %s\n", e.Step, e.Text)
	case investigation.EventToolCall:
		fmt.Fprintf(w, "  -> %s\n", e.Text)
	case investigation.EventToolResult:
		fmt.Fprintf(w, "  <- %s\n", e.Text)
	case investigation.EventStepDone:
		fmt.Fprintf(w, "  done: %s\n", indent(e.Text, "        "))
	case investigation.EventInsight:
		for _, in := range e.Items {
			fmt.Fprintf(w, "  insight: %s\n", in)
		}
	case investigation.EventPlanUpdate:
		for _, u := range e.Items {
			fmt.Fprintf(w, "  plan: %s\n", u)
		}
		fmt.Fprintf(w, "  completed: %s\n  pending:   %s\n", list(e.Completed), list(e.Pending))
	case investigation.EventNote:
		fmt.Fprintf(w, "  note: %s\n", e.Text)
	case investigation.EventConclusion:
		p.conclusion(e.Text)
	}
}

func (p *printer) conclusion(md string) {
	p.concluded = true
	fmt.Fprintf(p.out, "\n==================== CONCLUSION ====================\n%s\n", strings.TrimSpace(md))
}

func list(items []string) string {
	if len(items) == 0 {
		return "(none)"
	}
	return strings.Join(items, "; ")
}

func indent(s, prefix string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+prefix)
}
