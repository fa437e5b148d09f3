package gemini

import (
	"net"
	"net/url"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/investigation"
)

// Describe names the model and the endpoint a client from NewClient calls
// (the SDK has resolved GOOGLE_GEMINI_BASE_URL and its defaults by then), for
// the worker's catalog. Credentials never leave: the URL loses any user
// info, query and fragment, and the API key is only checked for presence.
func Describe(c *genai.Client, model string) investigation.ModelEndpoint {
	cc := c.ClientConfig()
	backend := backendGeminiAPI
	if cc.Backend == genai.BackendVertexAI {
		backend = backendVertexAI
		if cc.APIKey != "" && cc.Project == "" {
			backend = backendVertexExpress
		}
	}
	base := publicURL(cc.HTTPOptions.BaseURL)
	return investigation.ModelEndpoint{Model: model, Backend: backend, BaseURL: base, Local: isLocal(base)}
}

// publicURL keeps the scheme, host and path of a base URL: a proxy URL may
// carry a password or a key in its user info or query.
func publicURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// isLocal says the URL's host is this machine: localhost or a loopback or
// unspecified address.
func isLocal(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}
