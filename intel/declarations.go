package intel

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"

	"google.golang.org/genai"
)

// The model-facing declaration of each tool (name, description, parameters)
// lives in declarations/<tool name>.json, so that wording changes are data,
// not code.
//
//go:embed declarations/*.json
var declarationFS embed.FS

// declaration reads declarations/<name>.json. The files are embedded at build
// time, so a missing or malformed one is a build defect: it panics at start
// (and in every test of the package), never on a model's input. Unknown
// fields are refused so that a misspelt "required" cannot pass unnoticed.
func declaration(name string) *genai.FunctionDeclaration {
	raw, err := declarationFS.ReadFile("declarations/" + name + ".json")
	if err != nil {
		panic(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var d genai.FunctionDeclaration
	if err := dec.Decode(&d); err != nil {
		panic(fmt.Sprintf("declarations/%s.json: %v", name, err))
	}
	if d.Name != name {
		panic(fmt.Sprintf("declarations/%s.json declares %q", name, d.Name))
	}
	return &d
}

// The declarations, read once; callers treat them as read-only (the
// registry copies one before adding its ref_id parameter).
var (
	otxDeclaration           = declaration("query_otx")
	urlscanSearchDeclaration = declaration("urlscan_search")
	urlscanResultDeclaration = declaration("urlscan_result")
	virusTotalDeclaration    = declaration("virustotal_lookup")
	abuseIPDBDeclaration     = declaration("abuseipdb_check")
)
