package redact

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
)

const key = "Test-Key/0123456789+abc="

func TestStringForms(t *testing.T) {
	r := New(key)
	forms := map[string]string{
		"as sent":             key,
		"other letter case":   strings.ToUpper(key),
		"JSON-escaped slash":  strings.ReplaceAll(key, "/", `\/`),
		"query-escaped":       url.QueryEscape(key),
		"path-escaped":        url.PathEscape(key),
		"lower-case % escape": strings.ToLower(url.QueryEscape(key)),
		"base64":              base64.StdEncoding.EncodeToString([]byte(key)),
		"base64 url, raw":     base64.RawURLEncoding.EncodeToString([]byte(key)),
		"base64 basic auth":   base64.StdEncoding.EncodeToString([]byte("user:" + key)),
		"base64 in a blob":    base64.StdEncoding.EncodeToString([]byte(`{"headers":{"X-Key":"` + key + `"}}`)),
	}
	for name, form := range forms {
		got := r.String("the proxy said: " + form + " (end)")
		if strings.Contains(got, form) || !strings.Contains(got, Mark) {
			t.Errorf("%s: %q not redacted: %q", name, form, got)
		}
		if !strings.HasPrefix(got, "the proxy said: ") || !strings.HasSuffix(got, " (end)") {
			t.Errorf("%s: the text around the key changed: %q", name, got)
		}
	}
	if got := r.String("nothing secret here"); got != "nothing secret here" {
		t.Errorf("clean text changed: %q", got)
	}
}

func TestNoSecrets(t *testing.T) {
	for _, r := range []*Redactor{nil, New(), New("")} {
		if got := r.String("abc"); got != "abc" {
			t.Errorf("got %q", got)
		}
		err := errors.New("abc")
		if r.Error(err) != err {
			t.Error("error replaced")
		}
		if b, err := r.JSON([]byte(`{"a": 1}`)); err != nil || string(b) != `{"a": 1}` {
			t.Errorf("JSON: %s, %v", b, err)
		}
	}
}

func TestError(t *testing.T) {
	r := New(key)
	clean := errors.New("connection refused")
	if r.Error(clean) != clean {
		t.Error("a clean error is kept as is")
	}
	got := r.Error(errors.New("proxy refused headers map[X-Key:[" + key + "]]"))
	if strings.Contains(got.Error(), key) || !strings.Contains(got.Error(), Mark) {
		t.Errorf("not redacted: %v", got)
	}
}

// A key behind JSON escapes survives redaction of the raw text; JSON
// redacts the decoded strings, and keeps the document otherwise intact.
func TestJSONEscapedKey(t *testing.T) {
	r := New("test-key-0123456789")
	body := []byte(`{"message": "bad key \u0074est-key-0123456789", "n": 12345678901234567890, "list": ["x", {"t\u0065st-key-0123456789": true}]}`)
	if strings.Contains(r.String(string(body)), Mark) {
		t.Fatal("the escaped key is found in raw text: the test proves nothing")
	}
	out, err := r.JSON(body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(out)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m["message"] != "bad key "+Mark {
		t.Errorf("message = %q", m["message"])
	}
	if m["n"] != json.Number("12345678901234567890") {
		t.Errorf("number changed: %v", m["n"])
	}
	if inner := m["list"].([]any)[1].(map[string]any); inner[Mark] != true {
		t.Errorf("object key not redacted: %v", inner)
	}
	if strings.Contains(string(out), "test-key-0123456789") {
		t.Errorf("key left in %s", out)
	}
	for _, bad := range []string{`<html>`, `{"a": 1} trailing`, ``} {
		if _, err := r.JSON([]byte(bad)); err == nil {
			t.Errorf("JSON(%q) accepted", bad)
		}
	}
}
