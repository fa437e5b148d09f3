package main

import (
	"testing"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/intake"
)

// TestMakeBurst: the burst's mix and the groups it must come to, counted
// by the intake's own rules.
func TestMakeBurst(t *testing.T) {
	for _, noGroup := range []bool{false, true} {
		b := makeBurst(1000, noGroup)
		if len(b.msgs) != 1000 || b.repeats != 300 || b.newCounts != 100 || b.attacker != 200 || b.malformd != 50 || b.unique != 350 {
			t.Fatalf("mix %+v", b)
		}
		identities, groups, invalid := map[string]bool{}, map[string]bool{}, 0
		for _, m := range b.msgs {
			al, err := alerts.Parse(m)
			if err != nil {
				invalid++
				continue
			}
			id := intake.Identify(al).Key
			identities[id] = true
			group := id
			if !noGroup {
				for _, k := range intake.Keys(al.Data) {
					if k == "ip:203.0.113.66" {
						group = k
					}
				}
			}
			groups[group] = true
		}
		if invalid != b.malformd || len(identities) != b.unique+b.attacker || len(groups) != b.groups {
			t.Errorf("no-group %v: %d invalid, %d identities, %d groups; want %d, %d, %d", noGroup, invalid, len(identities), len(groups), b.malformd, b.unique+b.attacker, b.groups)
		}
	}
}

func TestParseIntakeFlags(t *testing.T) {
	o, err := parseFlags([]string{"-intake", "-intake-messages", "200", "-intake-no-group"})
	if err != nil || !o.intake || o.intakeMessages != 200 || o.intakeMaxRunning != 20 || !o.intakeNoGroup {
		t.Errorf("%+v %v", o, err)
	}
	if _, err := parseFlags([]string{"-intake", "-intake-max-running", "0"}); err == nil {
		t.Error("-intake-max-running 0 accepted")
	}
}
