package investigation

// Catalog is what a worker reports about itself (the ToolCatalog workflow,
// behind starter tools and starter eval): every tool, on or off, and the
// model endpoint the investigation calls.
type Catalog struct {
	Tools []ToolStatus  `json:"tools"`
	Model ModelEndpoint `json:"model"`
	// MCP are the worker's MCP servers and their state.
	MCP []MCPServer `json:"mcp,omitempty"`
	// Store is the Firestore database the worker keeps alerts, memories
	// and transcripts in: starter eval runs cases only on a worker whose
	// database is the eval's (nil: a worker older than the field).
	Store *StoreEndpoint `json:"store,omitempty"`
}

// StoreEndpoint names a worker's Firestore database; no credential.
type StoreEndpoint struct {
	Project  string `json:"project"`
	Database string `json:"database"`
	// Emulator says the database is on the Firestore emulator.
	Emulator bool `json:"emulator,omitempty"`
}

// MCPServer is one configured MCP server as a worker sees it: connected
// (with how many tools it offers and how many were skipped) or failed, and
// why.
type MCPServer struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	State     string `json:"state"`
	Error     string `json:"error,omitempty"`
	Tools     int    `json:"tools"`
	Skipped   int    `json:"skipped,omitempty"`
}

// ToolStatus describes one tool, on or off, for starter tools.
type ToolStatus struct {
	Name        string `json:"name"`
	Enabled     bool   `json:"enabled"`
	Reason      string `json:"reason,omitempty"`
	Description string `json:"description,omitempty"`
	// Acts marks an outside tool whose calls wait for the analyst's approval.
	Acts bool `json:"acts,omitempty"`
	// Says is an outside tool's own description, as its server wrote it
	// (cleaned); ClaimsReadOnly says the server marks it read-only, which
	// never waives the approval (tools.Claimed).
	Says           string `json:"says,omitempty"`
	ClaimsReadOnly bool   `json:"claims_read_only,omitempty"`
}

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
