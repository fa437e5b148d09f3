package geminitest

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"google.golang.org/genai"
)

// EmbeddingDims is the size of the vectors Auto returns.
const EmbeddingDims = 768

// Auto returns a deterministic responder for offline demos, when nobody has a
// Gemini key. It answers by phase:
//
//   - plan: {"objective", "steps"} with a get_alert step, a search_alerts
//     step and an analysis step, using only tools listed in the prompt as
//     lines "- `name`: description";
//   - reflect: {"achieved": false, "insights": [one sentence from the step
//     result], "plan_updates": []};
//   - mode: {"mode": "plan", "reason": ...};
//   - structured (any other schema): an object with every schema property
//     set to an empty value of its type (first enum value for enums);
//   - tool_call: one call of the declared tool that the step text (first
//     user content) names, else the first declared tool. get_alert gets
//     {"id": <"Alert ID: X" line>}, search_alerts gets a same-type search
//     ({"field":"type","op":"==","value":<"Alert type: X" line>,
//     "value_type":"string","limit":10}), other tools get each required
//     parameter set to its first enum value or an empty value of its type;
//   - tool_result: "Findings for this step: ..." with a compact rendering of
//     the function responses;
//   - conclude: Markdown with Summary, Key findings, Assessment,
//     Uncertainties and Recommended actions sections, saying it was written
//     by the offline stand-in;
//   - embed: AutoEmbedding of each text.
func Auto() Handler {
	return func(r *Request) Reply {
		switch r.Phase() {
		case PhaseEmbed:
			vs := make([][]float32, len(r.EmbedTexts))
			for i, t := range r.EmbedTexts {
				vs[i] = AutoEmbedding(t)
			}
			return Embeddings(vs...)
		case PhasePlan:
			return JSON(autoPlan(r))
		case PhaseReflect:
			return JSON(autoReflect(r))
		case PhaseConclude:
			return JSON(map[string]any{
				"report":     autoConclusion(r),
				"evidence":   []any{},
				"verdict":    "undetermined",
				"confidence": "low",
			})
		case PhaseMode:
			return JSON(map[string]any{
				"mode":   "plan",
				"reason": "The offline Gemini stand-in always runs a full Plan & Execute investigation.",
			})
		case PhaseIntrospect:
			return JSON(map[string]any{"claims": []any{}, "helpful_memory_ids": []any{}, "harmful_memory_ids": []any{}})
		case PhaseStructured:
			v := exampleValue(r.ResponseSchema, 0)
			if v == nil {
				v = map[string]any{}
			}
			return JSON(v)
		case PhaseToolResult:
			return Text(autoFindings(r))
		case PhaseToolCall:
			if call := autoCall(r); call != nil {
				return Calls(call)
			}
			return Text("Findings for this step: no tool was needed; the evidence gathered so far stands as reported in the earlier steps.")
		default:
			return Text(autoConclusion(r))
		}
	}
}

var (
	toolLineRE  = regexp.MustCompile("(?m)^[ \t]*[-*][ \t]*`([A-Za-z0-9_.:-]+)`[ \t]*:")
	alertIDRE   = regexp.MustCompile(`(?mi)^[ \t>*_-]*alert[ _]id[*_]*[ \t]*:[ \t]*(\S.*?)[ \t]*$`)
	alertTypeRE = regexp.MustCompile(`(?mi)^[ \t>*_-]*alert[ _]type[*_]*[ \t]*:[ \t]*(\S.*?)[ \t]*$`)
	jsonIDRE    = regexp.MustCompile(`"id"\s*:\s*"([^"]+)"`)
	jsonTypeRE  = regexp.MustCompile(`"type"\s*:\s*"([^"]+)"`)
	resultRE    = regexp.MustCompile(`(?im)^[ \t#*_-]*(?:step[ \t]+)?result[^:\n]{0,40}:[ \t]*(.*)$`)
)

// listedTools returns the tool names the prompt lists as "- `name`: ...".
func listedTools(text string) []string {
	var names []string
	for _, m := range toolLineRE.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

func firstMatch(text string, res ...*regexp.Regexp) string {
	for _, re := range res {
		if m := re.FindStringSubmatch(text); m != nil {
			if v := strings.Trim(strings.TrimSpace(m[1]), "`\"'* "); v != "" {
				return v
			}
		}
	}
	return ""
}

func alertID(r *Request) string {
	if v := firstMatch(r.SystemText(), alertIDRE); v != "" {
		return v
	}
	return firstMatch(r.Text(), alertIDRE, jsonIDRE)
}

func alertType(r *Request) string {
	if v := firstMatch(r.SystemText(), alertTypeRE); v != "" {
		return v
	}
	return firstMatch(r.Text(), alertTypeRE, jsonTypeRE)
}

type autoStep struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Tools       []string `json:"tools"`
	Expected    string   `json:"expected"`
}

func autoPlan(r *Request) map[string]any {
	text := r.Text()
	tools := listedTools(text)
	subject := "the alert"
	if id := firstMatch(text, alertIDRE, jsonIDRE); id != "" {
		subject = "alert " + id
	}
	if typ := firstMatch(text, alertTypeRE, jsonTypeRE); typ != "" {
		subject += " (" + typ + ")"
	}

	pick := func(preferred string, exclude []string) []string {
		if slices.Contains(tools, preferred) {
			return []string{preferred}
		}
		for _, t := range tools {
			if !slices.Contains(exclude, t) {
				return []string{t}
			}
		}
		return []string{}
	}
	first := pick("get_alert", nil)
	second := pick("search_alerts", first)

	describe := func(tools []string, withTool, without string) string {
		if len(tools) == 0 {
			return without
		}
		return fmt.Sprintf(withTool, tools[0])
	}
	steps := []autoStep{
		{
			ID:          "step_1",
			Description: describe(first, "Retrieve the full alert record with %s and confirm its key fields (resource, principal, indicators).", "Review the alert record and confirm its key fields (resource, principal, indicators)."),
			Tools:       first,
			Expected:    "The alert's details: affected resource, principal, indicators and timestamps.",
		},
		{
			ID:          "step_2",
			Description: describe(second, "Use %s to look for earlier alerts of the same type and see whether this activity recurs.", "Look for earlier alerts of the same type and see whether this activity recurs."),
			Tools:       second,
			Expected:    "A list of related past alerts, or confirmation that there are none.",
		},
		{
			ID:          "step_3",
			Description: "Analyse the evidence gathered so far and assess whether the alert is a true positive.",
			Tools:       []string{},
			Expected:    "An assessment of likelihood and impact with the supporting evidence.",
		},
	}
	return map[string]any{
		"objective":             fmt.Sprintf("Determine whether %s reflects malicious activity and what should be done about it.", subject),
		"continues_active_plan": false,
		"steps":                 steps,
	}
}

func autoReflect(r *Request) map[string]any {
	text := r.Text()
	snippet := ""
	if i := strings.Index(text, "Findings for this step:"); i >= 0 {
		snippet = text[i+len("Findings for this step:"):]
	} else if m := resultRE.FindStringSubmatchIndex(text); m != nil {
		snippet = text[m[2]:m[3]]
		if strings.TrimSpace(snippet) == "" {
			snippet = text[m[1]:]
		}
	}
	snippet = strings.TrimSpace(snippet)
	if nl := strings.Index(snippet, "\n"); nl > 0 {
		snippet = snippet[:nl]
	}
	snippet = strings.TrimRight(oneLine(snippet, 160), ".")
	insight := "The step finished, but its result gave the offline stand-in nothing specific to note."
	if snippet != "" {
		insight = "The step result reports: " + snippet + "."
	}
	return map[string]any{
		"achieved":     false,
		"insights":     []string{insight},
		"plan_updates": []any{},
	}
}

// autoCall picks the declared function the step text names (earliest
// mention), else the first declared one that is a plain lookup (not
// ask_user, which would wait for a person, nor bigquery_agent). It returns
// nil when there is none: such a step is answered in text.
func autoCall(r *Request) *genai.FunctionCall {
	decls := r.FunctionDeclarations()
	if len(decls) == 0 {
		return &genai.FunctionCall{Name: "no_function_declared"}
	}
	stepText := ""
	for _, c := range r.Contents {
		if c != nil && c.Role != genai.RoleModel {
			stepText = ContentText(c)
			break
		}
	}
	// The step itself comes last in the opening content, after the alert
	// and earlier results.
	if i := strings.LastIndex(stepText, stepHeading); i >= 0 {
		stepText = strings.TrimSpace(stepText[i+len(stepHeading):])
		if _, desc, ok := strings.Cut(strings.SplitN(stepText, "\n", 2)[0], ": "); ok {
			stepText = desc + "\n" + stepText
		}
	}
	var chosen *genai.FunctionDeclaration
	best := -1
	for _, fd := range decls {
		if fd.Name == "" {
			continue
		}
		if i := indexWord(stepText, fd.Name); i >= 0 && (best < 0 || i < best) {
			chosen, best = fd, i
		}
	}
	if chosen == nil {
		for _, fd := range decls {
			if fd.Name != "ask_user" && fd.Name != "bigquery_agent" {
				chosen = fd
				break
			}
		}
		if chosen == nil {
			return nil
		}
	}

	var args map[string]any
	switch chosen.Name {
	case "get_alert":
		args = map[string]any{"id": alertID(r)}
	case "search_alerts":
		args = map[string]any{"field": "type", "op": "==", "value": alertType(r), "value_type": "string", "limit": 10}
	case "bigquery_agent":
		args = map[string]any{"request": strings.SplitN(stepText, "\n", 2)[0]}
	default:
		args = requiredArgs(chosen)
	}
	return &genai.FunctionCall{
		ID:   "auto-" + strconv.Itoa(len(r.Contents)) + "-" + chosen.Name,
		Name: chosen.Name,
		Args: args,
	}
}

// stepHeading opens the step a model turn must execute.
const stepHeading = "## Execute this step"

// indexWord finds name in text as a whole identifier.
func indexWord(text, name string) int {
	isIdent := func(b byte) bool {
		return b == '_' || b == '-' || b == '.' || ('0' <= b && b <= '9') || ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z')
	}
	for off := 0; off < len(text); {
		i := strings.Index(text[off:], name)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(name)
		if (i == 0 || !isIdent(text[i-1])) && (end == len(text) || !isIdent(text[end]) || (text[end] == '.' && (end+1 == len(text) || !isIdent(text[end+1])))) {
			return i
		}
		off = i + 1
	}
	return -1
}

// requiredArgs sets each required parameter to its first enum value or an
// empty value of its type.
func requiredArgs(fd *genai.FunctionDeclaration) map[string]any {
	args := map[string]any{}
	schema := schemaMap(fd.Parameters)
	if schema == nil {
		schema, _ = toMap(fd.ParametersJsonSchema)
	}
	props, _ := schema["properties"].(map[string]any)
	for _, name := range stringList(schema["required"]) {
		p, _ := props[name].(map[string]any)
		args[name] = exampleValue(p, maxDepth) // scalars only at this depth
	}
	return args
}

const maxDepth = 6

// exampleValue is an empty value of the schema's type: the first enum value,
// "", 0, false, [] or an object holding every property. Works on both the
// genai.Schema wire form ("OBJECT") and JSON Schema ("object").
func exampleValue(schema map[string]any, depth int) any {
	if schema == nil {
		return ""
	}
	if enum, _ := schema["enum"].([]any); len(enum) > 0 {
		return enum[0]
	}
	typ := strings.ToLower(schemaType(schema["type"]))
	switch typ {
	case "integer", "number":
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object", "":
		props, _ := schema["properties"].(map[string]any)
		if typ == "" && props == nil {
			return ""
		}
		obj := map[string]any{}
		if depth >= maxDepth {
			return obj
		}
		for name, p := range props {
			pm, _ := p.(map[string]any)
			obj[name] = exampleValue(pm, depth+1)
		}
		return obj
	default:
		return ""
	}
}

// schemaType reads "type", which JSON Schema allows to be a list.
func schemaType(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && strings.ToLower(s) != "null" {
				return s
			}
		}
	}
	return ""
}

func stringList(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		switch s := x.(type) {
		case string:
			out = append(out, s)
		default:
			out = append(out, fmt.Sprint(s))
		}
	}
	return out
}

func schemaMap(s *genai.Schema) map[string]any {
	if s == nil {
		return nil
	}
	m, _ := toMap(s)
	return m
}

func toMap(v any) (map[string]any, bool) {
	if v == nil {
		return nil, false
	}
	if m, ok := v.(map[string]any); ok {
		return m, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil, false
	}
	return m, true
}

const maxFindings = 400

func autoFindings(r *Request) string {
	var parts []string
	for _, fr := range r.FunctionResponses() {
		b, err := json.Marshal(compactValue(fr.Response, 0))
		if err != nil {
			b = []byte(fmt.Sprint(fr.Response))
		}
		parts = append(parts, fr.Name+" → "+string(b))
	}
	return "Findings for this step: " + oneLine(strings.Join(parts, "; "), maxFindings)
}

// compactValue shortens long strings and lists so that a rendering of v
// shows a little of everything rather than all of the first field.
func compactValue(v any, depth int) any {
	const maxString, maxItems = 60, 5
	switch x := v.(type) {
	case string:
		return oneLine(x, maxString)
	case map[string]any:
		if depth >= maxDepth {
			return "{…}"
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = compactValue(e, depth+1)
		}
		return out
	case []any:
		if depth >= maxDepth {
			return "[…]"
		}
		n := min(len(x), maxItems)
		out := make([]any, 0, n+1)
		for _, e := range x[:n] {
			out = append(out, compactValue(e, depth+1))
		}
		if len(x) > n {
			out = append(out, fmt.Sprintf("… %d more", len(x)-n))
		}
		return out
	default:
		return v
	}
}

func autoConclusion(r *Request) string {
	var quotes []string
	var lines []string
	for _, c := range r.Contents {
		for _, l := range strings.Split(ContentText(c), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
	}
	addQuote := func(l string) {
		q := oneLine(strings.TrimLeft(l, "|-*># "), 200)
		if strings.HasSuffix(q, ":") {
			return // a heading, not a finding
		}
		if q != "" && len(quotes) < 2 && !slices.Contains(quotes, q) {
			quotes = append(quotes, q)
		}
	}
	for _, l := range lines {
		low := strings.ToLower(l)
		if strings.Contains(low, "finding") || strings.Contains(low, "insight") {
			addQuote(l)
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "* ") {
			addQuote(l)
		}
	}
	for i := len(lines) - 1; i >= 0 && len(quotes) < 2; i-- {
		addQuote(lines[i])
	}

	var b strings.Builder
	b.WriteString("## Summary\n\n")
	b.WriteString("This conclusion was written by the offline Gemini stand-in (geminitest), not by Gemini: no Gemini credentials were configured, so it restates the collected evidence without analysing it.\n\n")
	b.WriteString("## Key findings\n\n")
	if len(quotes) == 0 {
		b.WriteString("- The prompt held no findings to quote.\n\n")
	}
	for _, q := range quotes {
		b.WriteString("> " + q + "\n\n")
	}
	b.WriteString("## Assessment\n\n")
	b.WriteString("Undetermined. The stand-in cannot judge whether the activity is malicious; treat the alert as needing human review.\n\n")
	b.WriteString("## Uncertainties\n\n")
	b.WriteString("- Every plan, tool choice and conclusion in this run came from a deterministic stand-in.\n")
	b.WriteString("- Evidence was gathered only by the tool calls shown in the findings.\n\n")
	b.WriteString("## Recommended actions\n\n")
	b.WriteString("- Review the findings above manually.\n")
	b.WriteString("- Re-run the investigation with GEMINI_API_KEY (or Vertex AI) configured for a real analysis.\n")
	return b.String()
}

// AutoEmbedding is the deterministic unit vector Auto returns for text: each
// lower-cased word adds ±1 at a few hashed positions, so texts sharing words
// are close and identical texts are identical. Text without words maps to
// the first basis vector.
func AutoEmbedding(text string) []float32 {
	acc := make([]float64, EmbeddingDims)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		h := fnv.New64a()
		_, _ = h.Write([]byte(w))
		x := h.Sum64()
		for k := 0; k < 4; k++ {
			x = splitmix64(x)
			sign := 1.0
			if x>>63 == 1 {
				sign = -1
			}
			acc[x%EmbeddingDims] += sign
		}
	}
	var norm float64
	for _, v := range acc {
		norm += v * v
	}
	out := make([]float32, EmbeddingDims)
	if norm == 0 {
		out[0] = 1
		return out
	}
	norm = math.Sqrt(norm)
	for i, v := range acc {
		out[i] = float32(v / norm)
	}
	return out
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
