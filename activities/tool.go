package activities

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
	"github.com/secops-agent/investigator/transcript"
)

// CallTool runs one function call and stores its result, capped in size,
// under in.Key for later model turns. Errors the model can act on (unknown
// tool, bad arguments, nothing found) are stored as the tool's result; other
// errors are returned so Temporal retries the activity.
func (a *Activities) CallTool(ctx context.Context, in ToolInput) (ToolOutput, error) {
	var response map[string]any
	out := ToolOutput{Key: in.Key, OK: true}
	registry := a.Tools
	if in.Toolset != "" {
		registry = a.Toolsets[in.Toolset]
	}
	if registry == nil {
		return ToolOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the %s tools are not configured on this worker", in.Toolset), ErrToolsetDisabled, nil)
	}
	t, ok := registry.Lookup(in.Call.Name)
	server, _, dotted := strings.Cut(in.Call.Name, ".")
	_, outside := t.(tools.Outside)
	switch {
	case (outside || dotted && in.Toolset == "") && !in.Recorded:
		// The model was never offered it (the server was down when the plan
		// was made, or the plan ran on a worker without it): text in the
		// alert may have named it, and no gate stood before it.
		out.OK = false
		out.Error = fmt.Sprintf("%s did not run: the plan did not offer it, so it cannot be called in this investigation", in.Call.Name)
	case !ok && dotted && in.Toolset == "":
		return ToolOutput{}, a.mcpMissing(server, in.Call.Name)
	case !ok:
		out.OK = false
		out.Error = fmt.Sprintf("unknown tool %q; available tools: %s", in.Call.Name, strings.Join(registry.Names(), ", "))
	default:
		args, err := a.resolveRefs(ctx, in)
		var result any
		if err == nil {
			err = approved(t, in, args)
		}
		if err == nil {
			info := tools.CallInfo{ID: in.Session + "/" + in.Key, Session: in.Session, ScanBytesLeft: in.ScanBytesLeft, MaxResultBytes: in.MaxResultBytes}
			ctx = tools.WithCallInfo(ctx, info)
			result, err = t.Call(ctx, args)
			out.ScannedBytes = tools.CallInfoFrom(ctx).Scanned()
		}
		switch {
		case err != nil:
			// A result for the model, or an error returned as is so that
			// Temporal sees its retry delay (activities/errors.go).
			msg, retry := toolFailure(in.Call.Name, err)
			if retry != nil {
				return ToolOutput{}, retry
			}
			out.OK = false
			out.Error = msg
			if tools.OutcomeUnknown(err) {
				out.Outcome = CallUnknown
			}
		default:
			response, out.Bytes, out.Truncated, err = shape(result, in.MaxResultBytes)
			if err != nil {
				return ToolOutput{}, fmt.Errorf("tool %s: %w", in.Call.Name, err)
			}
		}
	}
	if !out.OK {
		// An error quotes arguments and answers from outside: held to the
		// result limit like a result, for every tool (MCP ones too).
		out.Error = clipError(out.Error, in.MaxResultBytes)
		response = map[string]any{"error": out.Error}
		// Every other failure above is a refusal: the worker's own (not
		// offered, not approved, unknown tool) or the tool's.
		out.Outcome = cmp.Or(out.Outcome, CallRefused)
	}
	raw, err := prompt.MarshalJSON(response, "")
	if err != nil {
		return ToolOutput{}, fmt.Errorf("encode %s result: %w", in.Call.Name, err)
	}
	if out.OK {
		out.Preview = clip.String(string(raw), 160)
	}
	entry := transcript.Entry{Kind: transcript.KindTool, CallID: in.Call.ID, Tool: in.Call.Name, Response: string(raw)}
	stored, err := a.Model.Transcript.Put(ctx, in.Session, in.Key, entry)
	if err != nil {
		return ToolOutput{}, storeError(err)
	}
	if stored.Response != entry.Response {
		// An earlier attempt stored its result first; the model reads that
		// one, so history describes it too.
		out = describeStored(out, stored.Response)
		if !out.OK {
			out.Error = clipError(out.Error, in.MaxResultBytes)
		}
	}
	// The tool's name, key and sizes only: arguments and results may hold
	// the alert's data, which the logs do not get.
	Logger(ctx).Info("tool call", "tool", in.Call.Name, "key", in.Key, "ok", out.OK, "bytes", out.Bytes,
		"truncated", out.Truncated, "scanned_bytes", out.ScannedBytes)
	return out, nil
}

// approved refuses a call of a tool that acts unless the analyst approved
// exactly these arguments: the workflow's gate sets in.Approved, after the
// approval, from the arguments it showed. A call that skipped the gate (a
// tool the plan recorded as read-only that acts now) or whose arguments
// differ from those shown does not run.
func approved(t tools.Tool, in ToolInput, args map[string]any) error {
	if o, ok := t.(tools.Outside); !ok || !o.Acts() {
		return nil
	}
	if in.Approved == "" {
		return tools.Reject("%s did not run: it changes something outside the investigation, and the analyst did not approve this call", in.Call.Name)
	}
	if in.Approved != Approval(ActionArgs(args)) {
		return tools.Reject("%s did not run: its arguments are not the ones the analyst approved", in.Call.Name)
	}
	return nil
}

// ActionArgs is an action's arguments as the analyst is shown them and
// approves them: their JSON without ref_id, keys sorted (encoding/json).
// The workflow calls it too (workflow code: keep it deterministic).
func ActionArgs(args map[string]any) string {
	shown := make(map[string]any, len(args))
	for k, v := range args {
		if k != toolcall.RefIDArg {
			shown[k] = v
		}
	}
	raw, _ := json.Marshal(shown) // decoded JSON values always encode
	return string(raw)
}

// Approval is an approval bound to the arguments shown (ActionArgs): their
// hex SHA-256.
func Approval(shown string) string {
	sum := sha256.Sum256([]byte(shown))
	return hex.EncodeToString(sum[:])
}

// mcpMissing is the error of a call to an MCP tool this worker does not
// offer (a plan made on another worker, or before the server changed): a
// server that is configured but not connected now is retried (the call
// connects again); a server this worker lacks, or a tool it no longer
// lists, fails the call with one sentence the model reads.
func (a *Activities) mcpMissing(server, name string) error {
	if a.MCP == nil || !a.MCP.Configured(server) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("this worker has no MCP server %q configured (--mcp-config), so %s cannot run here", server, name), ErrMCPToolMissing, nil)
	}
	for _, s := range a.MCP.Statuses() {
		if s.Name == server && s.State != "connected" {
			return temporal.NewApplicationError(fmt.Sprintf("MCP server %q is not connected on this worker (%s)", server, s.Error), ErrMCPNotConnected)
		}
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("the MCP server %q no longer offers %s (its tool list changed after the plan was made)", server, name), ErrMCPToolMissing, nil)
}

// ErrMCPToolMissing is the error type of a call to an MCP tool this worker
// cannot run; ErrMCPNotConnected of one whose server is not connected now
// (retryable). Neither reached the server: an action that failed so did
// not run.
const (
	ErrMCPToolMissing  = "MCPToolMissing"
	ErrMCPNotConnected = "MCPNotConnected"
	// ErrToolsetDisabled: the call's toolset is not on this worker.
	ErrToolsetDisabled = "ToolsetDisabled"
)

// shape turns a tool result into the function-response object the model
// sees. Results over limit bytes are cut, with a note saying so; a non-object
// result is wrapped as {"result": ...}.
func shape(result any, limit int) (map[string]any, int, bool, error) {
	raw, err := prompt.MarshalJSON(result, "")
	if err != nil {
		return nil, 0, false, fmt.Errorf("encode result: %w", err)
	}
	size := len(raw)
	if size > limit {
		partial := string(raw[:max(0, limit-300)])
		for len(partial) > 0 && !utf8.ValidString(partial) {
			partial = partial[:len(partial)-1]
		}
		return map[string]any{
			"truncated":   true,
			"total_bytes": size,
			"note":        fmt.Sprintf("The result was %d bytes and was cut to fit %d; narrow the query (filters, limit, offset) for the rest.", size, limit),
			"partial":     partial,
		}, size, true, nil
	}
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		obj = map[string]any{"result": json.RawMessage(raw)}
	}
	return obj, size, false, nil
}

// clipError clips msg so that {"error": msg}, as the model reads it, fits
// in limit bytes (the default result limit when none is set); escapes can
// make the encoded text longer than msg, so it shrinks until it fits.
func clipError(msg string, limit int) string {
	if limit <= 0 {
		limit = investigation.DefaultMaxToolResultBytes
	}
	n, out := limit, msg
	for {
		raw, err := prompt.MarshalJSON(map[string]any{"error": out}, "")
		if err != nil || len(raw) <= limit || n <= 0 {
			return out
		}
		n -= len(raw) - limit
		out = clip.String(msg, max(n, 0))
	}
}

// describeStored is out as it describes a result an earlier attempt stored:
// an {"error": ...} object is a failed call, anything else a result.
func describeStored(out ToolOutput, response string) ToolOutput {
	var obj map[string]any
	_ = json.Unmarshal([]byte(response), &obj)
	if msg, ok := obj["error"].(string); ok && len(obj) == 1 {
		// What that attempt met is not stored: an action so is unknown.
		out.OK, out.Error, out.Preview, out.Bytes, out.Truncated, out.Outcome = false, msg, "", 0, false, CallUnknown
		return out
	}
	total, _ := obj["total_bytes"].(float64)
	out.OK, out.Error, out.Preview, out.Outcome = true, "", clip.String(response, 160), ""
	out.Truncated, _ = obj["truncated"].(bool)
	out.Bytes = cmp.Or(int(total), len(response))
	return out
}
