package investigation

import (
	"encoding/json"
	"testing"
	"time"
)

func TestDurationJSON(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Minute: `"30m"`, 90 * time.Minute: `"1h30m"`, 2 * time.Hour: `"2h"`, 15 * time.Second: `"15s"`, 1500 * time.Millisecond: `"1.5s"`,
	} {
		b, err := json.Marshal(Duration(d))
		if err != nil || string(b) != want {
			t.Errorf("%s: got %s, %v; want %s", d, b, err, want)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back.Duration() != d {
			t.Errorf("%s: read back %s, %v", d, back, err)
		}
	}
	var old Duration
	if err := json.Unmarshal([]byte("1800000000000"), &old); err != nil || old.Duration() != 30*time.Minute {
		t.Errorf("nanoseconds: %s, %v", old, err)
	}
	if err := json.Unmarshal([]byte(`"soon"`), &old); err == nil {
		t.Error("a bad duration was read")
	}
}
