package prompt

import (
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// ruleDelimiter finds the tag a data rule (Tag.Rule) names.
var ruleDelimiter = regexp.MustCompile("`" + openPrefix + "([0-9a-f]{12}) name" + closeMark + "`")

// RuleTag reads the tag the data rule in a system prompt names.
func RuleTag(system string) (Tag, bool) {
	m := ruleDelimiter.FindStringSubmatch(system)
	if m == nil {
		return "", false
	}
	return Tag(m[1]), true
}

// Open returns the lines of a rendered prompt text that stand outside its
// data blocks, the text the model may take for instructions. It fails when
// the blocks do not hold what Tag.Block promises: a block with another tag
// than tag, a content line without the quote prefix or one that could pass
// for a delimiter once NFKC-normalised, a delimiter out of place, a block
// left open. The contract tests read every phase's prompt with it.
func Open(text string, tag Tag) ([]string, error) {
	var out []string
	inside := ""
	for i, line := range strings.Split(text, "\n") {
		end, tg, name, ok := Delimiter(line)
		switch {
		case ok && inside == "" && !end:
			if tg != tag {
				return nil, fmt.Errorf("line %d: block %q opens with tag %s, not the prompt's %s", i+1, name, tg, tag)
			}
			inside = name
		case ok && inside != "" && end && name == inside:
			if tg != tag {
				return nil, fmt.Errorf("line %d: block %q closes with tag %s, not the prompt's %s", i+1, name, tg, tag)
			}
			inside = ""
		case inside != "":
			if !strings.HasPrefix(line, LinePrefix) {
				return nil, fmt.Errorf("line %d: a line of block %q is not quoted: %q", i+1, inside, line)
			}
			if n := norm.NFKC.String(line); strings.Contains(n, "<<<") || strings.Contains(n, ">>>") {
				return nil, fmt.Errorf("line %d: a line of block %q could pass for a delimiter: %q", i+1, inside, line)
			}
		case ok:
			return nil, fmt.Errorf("line %d: a delimiter out of place: %q", i+1, line)
		default:
			out = append(out, line)
		}
	}
	if inside != "" {
		return nil, fmt.Errorf("block %q is never closed", inside)
	}
	return out, nil
}
