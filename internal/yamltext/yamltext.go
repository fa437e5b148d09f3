// Package yamltext says why a YAML file did not decode in one line that
// quotes none of the file's values: yaml.v3 lists type errors on separate
// lines, quotes up to ten bytes of the offending value (a price or limit
// file may hold the start of a pasted secret), names Go types, and gives
// io.EOF for a file with no document.
package yamltext

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// yaml.v3's fixed messages (decode.go, resolve.go): the value between the
// backticks is the file's.
var (
	unknownField = regexp.MustCompile("(?s)^(line \\d+): field (.+) not found in type \\S+$")
	wrongType    = regexp.MustCompile("(?s)^(line \\d+): cannot unmarshal (!!\\w+)(?: `.*`)? into (\\S+)$")
	quoted       = regexp.MustCompile("(?s)`.*`")
)

// Empty is the sentence for a file holding no YAML document.
const Empty = "the file is empty (or holds only comments)"

// Error is err, from decoding YAML, as one line without the file's values:
// a line number and a field name, never a value.
func Error(err error) string {
	if errors.Is(err, io.EOF) {
		return Empty
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return oneLine(quoted.ReplaceAllString(strings.TrimPrefix(err.Error(), "yaml: "), "(a value)"))
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
		switch g := unknownField.FindStringSubmatch(m); {
		case g != nil:
			m = fmt.Sprintf("%s: unknown field %q", g[1], g[2])
		default:
			if g := wrongType.FindStringSubmatch(m); g != nil {
				m = fmt.Sprintf("%s: a %s value where %s belongs", g[1], g[2], g[3])
			} else {
				m = quoted.ReplaceAllString(m, "(a value)")
			}
		}
		msgs = append(msgs, oneLine(m))
	}
	return strings.Join(msgs, "; ")
}

// oneLine joins a message's lines (a field name may hold a line break).
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
