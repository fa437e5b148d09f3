package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
	"github.com/secops-agent/investigator/transcript"
)

// maxFilledRefBytes bounds what the refs of one call put into its
// arguments: many times any one result (MaxResultBytes), far below what
// would strain a worker.
const maxFilledRefBytes = 256 << 10

// resolveRefs returns the call's arguments with ref_id removed and every
// "ref:<name>[.<path>]" value replaced by the named call's result (or the
// value at path in it): a stored one (Refs) or one the workflow kept inline
// (InlineRefs). Problems are Rejections: the model sees them.
func (a *Activities) resolveRefs(ctx context.Context, in ToolInput) (map[string]any, error) {
	args := maps.Clone(in.Call.Args)
	delete(args, toolcall.RefIDArg)
	if len(in.Refs) == 0 && len(in.InlineRefs) == 0 {
		return args, nil
	}
	names := slices.Sorted(maps.Keys(in.Refs))
	keys := make([]string, len(names))
	for i, n := range names {
		if in.Refs[n] == "" {
			// An input scheduled before the workflow carried inline results
			// (InlineRefs) names one by the empty key: no store holds it.
			return nil, tools.Reject("%s%s names a result that is not stored: write the value itself", toolcall.RefPrefix, n)
		}
		keys[i] = in.Refs[n]
	}
	entries, err := a.Model.Transcript.GetAll(ctx, in.Session, keys)
	var missing *transcript.MissingError
	if errors.As(err, &missing) {
		return nil, tools.Reject("a result this call refers to is no longer stored (%s): call the tool it came from again", missing.Key)
	}
	if err != nil {
		return nil, err
	}
	responses := map[string]string{}
	for i, n := range names {
		responses[n] = entries[i].Response
	}
	for n, inline := range in.InlineRefs {
		if _, stored := responses[n]; !stored {
			responses[n] = inline
			names = append(names, n)
		}
	}
	results := map[string]any{}
	for _, n := range names {
		var v map[string]any
		if err := json.Unmarshal([]byte(responses[n]), &v); err != nil {
			return nil, fmt.Errorf("decode the result of %s: %w", n, err)
		}
		if msg, failed := v["error"]; failed && len(v) == 1 {
			return nil, tools.Reject("ref:%s refers to a call that failed: %v", n, msg)
		}
		results[n] = v
	}
	// Longest name first, as in the workflow's matching.
	slices.SortFunc(names, func(x, y string) int { return cmp.Or(len(y)-len(x), strings.Compare(x, y)) })
	// filled counts the bytes the refs put into the arguments: the same
	// result named a thousand times in one short call would hand the tool
	// a thousand copies.
	filled := 0
	fill := func(v any, size int, ref string) (any, error) {
		if filled += size; filled > maxFilledRefBytes {
			return nil, tools.Reject("%s: the results this call refers to would make its arguments larger than %d bytes; refer to each result once, or write the values needed", ref, maxFilledRefBytes)
		}
		return v, nil
	}
	var walk func(v any) (any, error)
	walk = func(v any) (any, error) {
		switch x := v.(type) {
		case string:
			ref, ok := strings.CutPrefix(x, toolcall.RefPrefix)
			if !ok {
				return x, nil
			}
			ref = strings.TrimSpace(ref)
			for _, n := range names {
				if ref == n {
					return fill(results[n], len(responses[n]), x)
				}
				if path, ok := strings.CutPrefix(ref, n+"."); ok {
					v, err := lookup(results[n], path, x)
					if err != nil {
						return nil, err
					}
					raw, _ := json.Marshal(v) // decoded from JSON: cannot fail
					return fill(v, len(raw), x)
				}
			}
			return nil, tools.Reject("%s names no earlier call of this turn", x)
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				r, err := walk(e)
				if err != nil {
					return nil, err
				}
				out[i] = r
			}
			return out, nil
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				r, err := walk(e)
				if err != nil {
					return nil, err
				}
				out[k] = r
			}
			return out, nil
		}
		return v, nil
	}
	for k, v := range args {
		if args[k], err = walk(v); err != nil {
			return nil, err
		}
	}
	return args, nil
}

// lookup follows a dotted path (object keys and array indexes) into v.
func lookup(v any, path, ref string) (any, error) {
	for _, seg := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[seg]
			if !ok {
				return nil, tools.Reject("%s: the result has no field %q", ref, seg)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, tools.Reject("%s: %q is not an index of a list of %d", ref, seg, len(x))
			}
			v = x[i]
		default:
			return nil, tools.Reject("%s: cannot look up %q in a %T", ref, seg, v)
		}
	}
	return v, nil
}
