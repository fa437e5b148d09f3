package gpubsub

import (
	"strings"
	"testing"
)

func TestParseNames(t *testing.T) {
	for _, tc := range []struct {
		name, project string
	}{
		{"projects/my-project/topics/alerts", "my-project"},
		{"projects/my-project/topics/abc", "my-project"},
		{"projects/my-project/topics/ab", ""},
		{"projects/my-project/topics/a" + strings.Repeat("b", 254), "my-project"},
		{"projects/my-project/topics/a" + strings.Repeat("b", 255), ""},
		{"projects/my-project/topics/9lives", ""},
		{"projects/My-Project/topics/alerts", ""},
		{"projects/my-project/topics/alerts/extra", ""},
		{"projects/my-project/subscriptions/alerts", ""},
	} {
		got, err := ParseTopic(tc.name)
		if got != tc.project || (err != nil) != (tc.project == "") {
			t.Errorf("ParseTopic(%.60q) = %q, %v; want %q", tc.name, got, err, tc.project)
		}
		if strings.Contains(tc.name, "/subscriptions/") {
			continue // a subscription's name is no topic's; its twin below is
		}
		sub := strings.Replace(tc.name, "/topics/", "/subscriptions/", 1)
		got, err = ParseSubscription(sub)
		if got != tc.project || (err != nil) != (tc.project == "") {
			t.Errorf("ParseSubscription(%.60q) = %q, %v; want %q", sub, got, err, tc.project)
		}
	}
}
