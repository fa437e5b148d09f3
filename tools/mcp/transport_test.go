package mcp

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// headerTransport itself adds the headers only for the configured origin:
// a client that follows a redirect elsewhere sends them no further.
func TestHeaderTransportKeepsToItsOrigin(t *testing.T) {
	var got []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = append(got, r.Header.Get("Authorization")) }))
	defer other.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	defer first.Close()
	h := http.Header{}
	h.Set("Authorization", "Bearer s3cret")
	u, _ := url.Parse(first.URL + "/mcp")
	c := &http.Client{Transport: headerTransport{h, origin(u), http.DefaultTransport}}
	resp, err := c.Post(first.URL+"/mcp", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 2 || got[0] != "Bearer s3cret" || got[1] != "" {
		t.Fatalf("Authorization seen by the server, then the other origin: %q", got)
	}
}
