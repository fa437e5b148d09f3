package tools

import "github.com/secops-agent/investigator/investigation"

// Catalog is what a worker reports about itself (the ToolCatalog workflow,
// behind starter tools and starter eval): every tool, on or off, and the
// model endpoint the investigation calls.
type Catalog struct {
	Tools []Status                    `json:"tools"`
	Model investigation.ModelEndpoint `json:"model"`
}
