package investigation

import (
	"strings"
	"testing"
)

func TestSessionOf(t *testing.T) {
	const id = "intake-x-0123456789ab"
	for _, c := range []struct{ session, want string }{
		{"", id},
		{id, id},
		{id + "~20261130T101500.000Z", id + "~20261130T101500.000Z"},
		{id + "~" + strings.Repeat("a", MaxSessionSuffix), id + "~" + strings.Repeat("a", MaxSessionSuffix)},
		// Not this investigation's: the ID it names is used.
		{"intake-y-0123456789ab", id},
		{id + "-bq-t1-step_1-i1-c1", id},
		{id + "~" + strings.Repeat("a", MaxSessionSuffix+1), id},
		{id + "~a/b", id},
		{id + "~x~y", id},
		{id + "~", id},
	} {
		if got := SessionOf(id, c.session); got != c.want {
			t.Errorf("SessionOf(%q) = %q, want %q", c.session, got, c.want)
		}
	}
}
