package standin

import (
	"slices"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/prompt"
)

// page is a prompt text read the way the stand-in may read it: the lines in
// the open (written by the code and the templates) apart from the data
// blocks, whose content is untrusted and may only be read as values.
type page struct {
	open   []string
	blocks []block
}

type block struct {
	name    string
	content string
	// after is how many open lines came before the block.
	after int
}

// readPage splits text into open lines and data blocks (the delimiters
// prompt.Tag.Block writes, read by prompt.Delimiter). A line of a block that
// lacks the "| " prefix ends the block (a block never holds one).
func readPage(text string) page {
	var p page
	var cur *block
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		if cur != nil {
			if rest, ok := strings.CutPrefix(line, prompt.LinePrefix); ok {
				lines = append(lines, rest)
				continue
			}
			if line == "|" { // an empty content line, trimmed
				lines = append(lines, "")
				continue
			}
			cur.content = strings.Join(lines, "\n")
			p.blocks = append(p.blocks, *cur)
			cur, lines = nil, nil
			if end, _, _, ok := prompt.Delimiter(line); ok && end {
				continue
			}
		}
		if end, _, name, ok := prompt.Delimiter(line); ok && !end {
			cur = &block{name: name, after: len(p.open)}
			continue
		}
		p.open = append(p.open, line)
	}
	if cur != nil {
		cur.content = strings.Join(lines, "\n")
		p.blocks = append(p.blocks, *cur)
	}
	return p
}

// block returns the content of the first data block called name.
func (p page) block(name string) (string, bool) {
	for _, b := range p.blocks {
		if b.name == name {
			return b.content, true
		}
	}
	return "", false
}

// openText is the text outside the data blocks.
func (p page) openText() string { return strings.Join(p.open, "\n") }

// alertID reads the alert's ID from the prompt.AlertIDLabel line that
// precedes the alert's data block (the analyst's request, which may come
// first, cannot pass for it).
func (p page) alertID() string {
	end := len(p.open)
	for _, b := range p.blocks {
		if b.name == alertBlock || b.name == indicatorsBlock {
			end = b.after
			break
		}
	}
	for i := end - 1; i >= 0; i-- {
		if id, ok := strings.CutPrefix(p.open[i], prompt.AlertIDLabel); ok {
			return strings.TrimSpace(id)
		}
	}
	return ""
}

// step reads the step a turn must execute: the line after
// prompt.StepHeading is its ID (the planner's words follow in a data block).
func (p page) step() (id string, ok bool) {
	for i, l := range p.open {
		if strings.TrimSpace(l) == prompt.StepHeading && i+1 < len(p.open) {
			id = strings.TrimSpace(p.open[i+1])
			return id, id != ""
		}
	}
	return "", false
}

// catalogPrefix opens each tool's line in the planner's tool catalog
// (tools.Registry.Catalog writes "- `name`: purpose"). It is written by code,
// and no line of a data block can start with it, so an alert cannot add a
// tool to what the stand-in believes is available.
const catalogPrefix = "- `"

// listed says whether the catalog lists the tool.
func (p page) listed(tool string) bool {
	for _, l := range p.open {
		if strings.HasPrefix(l, catalogPrefix+tool+"`") {
			return true
		}
	}
	return false
}

// userPage reads the first user content of a request: the prompt of a
// structured phase, or the opening of a tool loop.
func userPage(r *geminitest.Request) page {
	for _, c := range r.Contents {
		if c != nil && c.Role != genai.RoleModel {
			return readPage(geminitest.ContentText(c))
		}
	}
	return page{}
}

// turn is what a tool loop has done so far: the function calls of its
// model turns and the responses to them, by call ID.
type turn struct {
	calls     []*genai.FunctionCall
	responses map[string]*genai.FunctionResponse
}

func readTurn(r *geminitest.Request) turn {
	t := turn{responses: map[string]*genai.FunctionResponse{}}
	for _, c := range r.Contents {
		if c == nil {
			continue
		}
		for _, part := range c.Parts {
			switch {
			case part == nil:
			case part.FunctionCall != nil:
				t.calls = append(t.calls, part.FunctionCall)
			case part.FunctionResponse != nil:
				t.responses[part.FunctionResponse.ID] = part.FunctionResponse
			}
		}
	}
	return t
}

// result is the response to the call with this ID, or nil.
func (t turn) result(id string) map[string]any {
	if fr := t.responses[id]; fr != nil {
		if fr.Response == nil {
			return map[string]any{}
		}
		return fr.Response
	}
	return nil
}

// final says whether function calling is off: the loop's last turn, which
// must answer in text.
func final(r *geminitest.Request) bool {
	tc := r.ToolConfig
	return tc != nil && tc.FunctionCallingConfig != nil && tc.FunctionCallingConfig.Mode == genai.FunctionCallingConfigModeNone
}

// declares says whether the request declares the function.
func declares(r *geminitest.Request, name string) bool {
	return slices.Contains(r.FunctionNames(), name)
}

// call is a function call with the ID the stand-in reads its result by.
func call(id, name string, args map[string]any) *genai.FunctionCall {
	return &genai.FunctionCall{ID: id, Name: name, Args: args}
}
