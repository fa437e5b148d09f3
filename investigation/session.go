package investigation

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// An investigation's session names its transcript, its progress and its
// sub-agents' workflow IDs. It is the workflow ID, or, for a run that
// reuses the workflow ID of a closed one (the intake's reinvestigation),
// the ID, SessionSeparator and a suffix, so the new run never meets the
// closed run's entries.
const (
	// SessionSeparator is a character no workflow ID the product makes
	// holds (they keep to [A-Za-z0-9._-]), so a session names its
	// workflow ID alone: no input can point a run at another
	// investigation's session.
	SessionSeparator = "~"
	// MaxSessionSuffix bounds the suffix.
	MaxSessionSuffix = 64
)

var sessionSuffix = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// CheckSession says whether session may be the session of workflow id:
// empty (the ID itself), the ID, or the ID, SessionSeparator and up to
// MaxSessionSuffix letters, digits, '.', '_' or '-'.
func CheckSession(id, session string) error {
	if session == "" || session == id {
		return nil
	}
	suffix, ok := strings.CutPrefix(session, id+SessionSeparator)
	if !ok || len(suffix) > MaxSessionSuffix || !sessionSuffix.MatchString(suffix) {
		return fmt.Errorf("the session %q is not this investigation's: it must be the workflow ID, or the ID, %q and up to %d letters, digits, '.', '_' or '-'",
			session, SessionSeparator, MaxSessionSuffix)
	}
	return nil
}

// SessionOf is workflow id's session: session when CheckSession allows
// it and it is set, else the ID.
func SessionOf(id, session string) string {
	if session == "" || CheckSession(id, session) != nil {
		return id
	}
	return session
}

// IntakeSession is the session of the run the intake's admission starts
// for an entity admitted at admitted: the workflow ID and the admission
// time, so every attempt of one start names the same, and the admission
// workflow knows which run a signal of its investigations comes from.
func IntakeSession(id string, admitted time.Time) string {
	return id + SessionSeparator + admitted.UTC().Format("20060102T150405.000000000Z")
}
