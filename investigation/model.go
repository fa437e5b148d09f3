package investigation

// ModelEndpoint says which model a worker calls and where, so that a client
// (starter tools, starter eval) can tell a real model from a local stand-in.
// It never holds a credential: the URL keeps only scheme, host and path.
type ModelEndpoint struct {
	Model   string `json:"model"`
	Backend string `json:"backend"` // "gemini-api", "vertex-ai" or "vertex-ai-express"
	BaseURL string `json:"base_url,omitempty"`
	// Local says the endpoint is on the worker's own machine (a loopback
	// address), as the offline Gemini stand-in is: its answers are scripted.
	Local bool `json:"local,omitempty"`
}
