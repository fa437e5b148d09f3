package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Profile names one stack the table can start: the dev stack (the Temporal
// dev server and one of everything) today; a production-shaped cluster
// later shares the entries that run in both.
type Profile string

const (
	// Dev is the local stack of `go tool task dev` and `investigate`.
	Dev Profile = "dev"
	// Eval is what `go tool task eval` runs: the dev stack with the eval's
	// own worker instead of the analyst's.
	Eval Profile = "eval"
)

// Service is one entry of the table: what runs, when, after what, and how
// the supervisor knows it is up. The functions take the resolved Stack so
// that one entry serves every profile and every port setting.
type Service struct {
	Name     string    // pid file, log file and messages: .data/pids/<Name>.pid, .data/logs/<Name>.log
	Title    string    // how messages name it ("Firestore emulator")
	Profiles []Profile // the stacks that run it
	// Count runs this many instances in a profile (Name-1, Name-2, ...);
	// a profile it does not name runs one, under Name.
	Count map[Profile]int
	// Enabled reports whether this stack runs it (nil: always) and, when
	// not, a line for the log (empty: say nothing).
	Enabled func(*Stack) (bool, string)
	// Needs are started (or reused) and ready before this one starts.
	Needs []string
	// Ports are the ports it listens on. A port that is in use by
	// something that does not pass Ready stops the start.
	Ports []Port
	// Launch says how to start it, or why it cannot (a missing binary).
	Launch func(s *Stack, instance int) (Launch, error)
	// Ready answers once the service serves; Timeout bounds the wait
	// (STACK_<TimeoutVar>_TIMEOUT seconds overrides it).
	Ready      Probe
	Timeout    time.Duration
	TimeoutVar string
	// ReadyOnTimeout takes a service still alive at Timeout as started
	// (a worker with a quiet logger never writes the line Ready looks for).
	ReadyOnTimeout bool
	// Reuse decides what happens when one already runs.
	Reuse Reuse
	// Settings (ReuseRecorded only) describes what it was started with,
	// without secrets: a recorded instance with other settings, or whose
	// program file changed since, is restarted.
	Settings func(*Stack) string
	// Match is a pattern the command line of its process-group leader
	// matches: a recorded pid reused by an unrelated process is ignored.
	Match string
	// Setup runs once it is ready, started here or reused (search
	// attributes, topics, a warning about a reused server's settings).
	Setup func(ctx context.Context, s *Stack) error
	// BeforeStop runs before the supervisor stops it (the Firestore save),
	// unless the stop is a clean's.
	BeforeStop func(s *Stack) error
	// Secrets: it starts with the product's secrets from the caller's
	// environment (isSecretVar); every other service starts without them.
	Secrets bool
	// Job marks a command that runs to completion (a schema migration):
	// it is ready when it exits 0 and is never reused or stopped.
	Job bool
}

// Launch is one start of a service.
type Launch struct {
	Argv []string
	Env  []string // added to the stack's environment
	// Note ends the ready line ("data loaded from .data/firestore/save-3").
	Note string
	// Hint follows the error when it does not become ready.
	Hint string
	// Credential runs it as another user (PostgreSQL, which refuses root).
	Credential *syscall.Credential
	// Record is written to .data/pids/<name>.<key> beside its pid
	// (Firestore: the project and database that a later save exports).
	Record map[string]string
}

// Port is one listening port, set by STACK_<Var>_PORT.
type Port struct {
	Var     string // TEMPORAL, TEMPORAL_UI, ...
	Default int
}

// Reuse is how a service already running is taken over.
type Reuse int

const (
	// ReuseAnswering takes whatever passes Ready on its ports, started by
	// this stack or not (a Temporal server the developer runs).
	ReuseAnswering Reuse = iota
	// ReuseRecorded takes only an instance this stack recorded, alive,
	// started with the same Settings from the same program file.
	ReuseRecorded
	// ReuseNever stops a recorded instance and starts a new one (what an
	// interrupted run left is not taken over).
	ReuseNever
	// ReuseOwn takes only the instance this stack recorded for this entry,
	// alive with its recorded start; anything else on its ports (the dev
	// profile's server, a server of the user's own, another data
	// directory's stack) stops the start: the cluster's parts must be its own.
	ReuseOwn
)

// instance is one process of a service in a plan.
type instance struct {
	svc   *Service
	name  string // svc.Name, or svc.Name-N with Count
	index int    // from 1
	needs []string
}

// plan is the instances one profile runs, in an order where each comes
// after what it needs.
type plan struct {
	order []*instance
	byKey map[string]*instance
	// skipped are services of the profile this stack does not run, with
	// the reason to log.
	skipped []string
}

// planFor selects the table's entries for profile p and orders them.
// Needs on an entry the stack does not run (the Gemini stand-in with real
// credentials) are dropped; needs on an unknown name or a cycle are
// errors in the table.
func planFor(table []Service, p Profile, s *Stack) (*plan, error) {
	names := map[string]bool{}
	for i := range table {
		if names[table[i].Name] {
			return nil, fmt.Errorf("service %q is in the table twice", table[i].Name)
		}
		names[table[i].Name] = true
	}
	pl := &plan{byKey: map[string]*instance{}}
	groups := map[string][]string{} // service name -> instance names
	var chosen []*Service
	for i := range table {
		svc := &table[i]
		if !svc.in(p) {
			continue
		}
		if svc.Enabled != nil {
			if ok, why := svc.Enabled(s); !ok {
				if why != "" {
					pl.skipped = append(pl.skipped, why)
				}
				continue
			}
		}
		chosen = append(chosen, svc)
		n := svc.Count[p]
		if n <= 1 {
			groups[svc.Name] = []string{svc.Name}
			continue
		}
		for k := 1; k <= n; k++ {
			groups[svc.Name] = append(groups[svc.Name], fmt.Sprintf("%s-%d", svc.Name, k))
		}
	}
	for _, svc := range chosen {
		var needs []string
		for _, n := range svc.Needs {
			if !names[n] {
				return nil, fmt.Errorf("service %q needs %q, which is not in the table", svc.Name, n)
			}
			needs = append(needs, groups[n]...) // nothing when not run here
		}
		for k, name := range groups[svc.Name] {
			pl.byKey[name] = &instance{svc: svc, name: name, index: k + 1, needs: needs}
		}
	}
	// Kahn's algorithm, taking ready entries in table order so the order
	// is stable.
	done := map[string]bool{}
	for len(pl.order) < len(pl.byKey) {
		progress := false
		for _, svc := range chosen {
			for _, name := range groups[svc.Name] {
				in := pl.byKey[name]
				if done[name] || !allIn(in.needs, done) {
					continue
				}
				done[name] = true
				pl.order = append(pl.order, in)
				progress = true
			}
		}
		if !progress {
			var stuck []string
			for name := range pl.byKey {
				if !done[name] {
					stuck = append(stuck, name)
				}
			}
			sort.Strings(stuck)
			return nil, fmt.Errorf("services %s need each other", strings.Join(stuck, ", "))
		}
	}
	return pl, nil
}

func (svc *Service) in(p Profile) bool {
	for _, q := range svc.Profiles {
		if q == p {
			return true
		}
	}
	return false
}

func allIn(names []string, set map[string]bool) bool {
	for _, n := range names {
		if !set[n] {
			return false
		}
	}
	return true
}

// dependents maps each instance to those that need it (for stopping in
// reverse).
func (pl *plan) dependents() map[string][]string {
	out := map[string][]string{}
	for _, in := range pl.order {
		for _, n := range in.needs {
			out[n] = append(out[n], in.name)
		}
	}
	return out
}
