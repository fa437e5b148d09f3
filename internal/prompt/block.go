// Package prompt renders what the model sees: Markdown templates embedded
// beside the activities that fill them, and the data blocks that hold
// untrusted text (alerts, tool output, step results, the conversation,
// memories) so that nothing inside them can pass for an instruction.
//
// A data block looks like this:
//
//	<<<DATA alert>>>
//	| {
//	|   "title": "SSH brute force"
//	| }
//	<<<END alert>>>
//
// Every line of the content starts with "| ", so no content line can close
// the block, open another one or start a Markdown section; line breaks of
// every kind become new quoted lines, other control characters are written
// as \u escapes, and "<<<" or ">>>" inside the content are broken up. Every
// other character, and so every indicator (a URL with & and <, a 64-hex hash,
// a Windows path), is kept verbatim.
package prompt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// LinePrefix begins every content line of a data block.
const LinePrefix = "| "

// Block returns content as the data block called name. name is chosen by
// the code (letters, digits, space, _ . : - are kept; anything else becomes
// _), never by the data.
func Block(name, content string) string {
	name = blockName(name)
	var b strings.Builder
	b.Grow(len(content) + len(content)/16 + 64)
	b.WriteString("<<<DATA " + name + ">>>\n")
	for _, line := range strings.Split(normalize(content), "\n") {
		b.WriteString(LinePrefix)
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.WriteString("<<<END " + name + ">>>")
	return b.String()
}

// JSONBlock returns v, encoded as indented JSON without HTML escaping, as
// the data block called name. JSON already escapes line breaks inside keys
// and values, so a key cannot start a line of its own.
func JSONBlock(name string, v any) (string, error) {
	raw, err := MarshalJSON(v, "  ")
	if err != nil {
		return "", fmt.Errorf("encode %s for the prompt: %w", name, err)
	}
	return Block(name, string(raw)), nil
}

// MarshalJSON encodes v without HTML escaping (URLs and command lines keep
// their & < >), indented when indent is not empty.
func MarshalJSON(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// normalize turns every line break into \n, writes other control and
// invisible format characters as \u escapes, and breaks up the block
// delimiters.
func normalize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		switch {
		case r == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				continue // \r\n: the \n follows
			}
			b.WriteByte('\n')
		case r == '\n', r == '\v', r == '\f', r == '\u0085', r == '\u2028', r == '\u2029':
			b.WriteByte('\n')
		case r == '\t':
			b.WriteByte('\t')
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	out := b.String()
	for strings.Contains(out, "<<<") || strings.Contains(out, ">>>") {
		out = strings.ReplaceAll(strings.ReplaceAll(out, "<<<", "<< <"), ">>>", "> >>")
	}
	return out
}

func blockName(name string) string {
	name = strings.Map(func(r rune) rune {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)), strings.ContainsRune(" _.:-", r):
			return r
		}
		return '_'
	}, strings.TrimSpace(name))
	if name == "" {
		return "data"
	}
	return name
}
