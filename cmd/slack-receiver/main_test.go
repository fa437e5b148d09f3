package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReceiverKeepsMessages(t *testing.T) {
	var out bytes.Buffer
	srv := httptest.NewServer(newReceiver(&out).handler())
	defer srv.Close()
	post := func(body string) (int, string) {
		resp, err := http.Post(srv.URL+"/services/local", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"text":"True positive (high confidence): SSH \u001b[31mbrute force","blocks":[{"type":"header"}]}`); code != 200 || body != "ok" {
		t.Fatalf("%d %s", code, body)
	}
	if code, body := post(`not json`); code != 400 || body != "invalid_payload" {
		t.Errorf("bad payload: %d %s", code, body)
	}
	resp, err := http.Get(srv.URL + "/messages")
	if err != nil {
		t.Fatal(err)
	}
	var kept []map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&kept)
	if len(kept) != 1 || kept[0]["blocks"] == nil {
		t.Errorf("kept %v", kept)
	}
	if strings.Contains(out.String(), "\x1b") || !strings.Contains(out.String(), "True positive (high confidence)") {
		t.Errorf("printed %q", out.String())
	}
}

// TestReceiverRefusesWhatSlackRefuses: text over Block Kit's bounds gets
// Slack's 400 invalid_blocks, so the local stack shows a message Slack
// would never show.
func TestReceiverRefusesWhatSlackRefuses(t *testing.T) {
	srv := httptest.NewServer(newReceiver(io.Discard).handler())
	defer srv.Close()
	for _, tc := range []struct {
		block string
		want  int
	}{
		{`{"type":"section","text":{"type":"plain_text","text":"` + strings.Repeat("&amp;", 600) + `"}}`, 200},
		{`{"type":"section","text":{"type":"plain_text","text":"` + strings.Repeat("&amp;", 601) + `"}}`, 400},
		{`{"type":"header","text":{"type":"plain_text","text":"` + strings.Repeat("é", 151) + `"}}`, 400},
		{`{"type":"section","fields":[{"type":"plain_text","text":"` + strings.Repeat("x", 2001) + `"}]}`, 400},
		{`{"type":"context","elements":[{"type":"plain_text","text":"` + strings.Repeat("x", 3001) + `"}]}`, 400},
		{`{"type":"actions","elements":[{"type":"button","text":{"type":"plain_text","text":"` + strings.Repeat("x", 76) + `"}}]}`, 400},
	} {
		resp, err := http.Post(srv.URL+"/services/local", "application/json", strings.NewReader(`{"text":"t","blocks":[`+tc.block+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%.60s: %d %s, want %d", tc.block, resp.StatusCode, b, tc.want)
		}
	}
}
