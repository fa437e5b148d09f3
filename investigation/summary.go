package investigation

import "strings"

// A conclusion's Markdown opens with its Summary: the first section, under
// its heading if it has one. A delivery carries it (SummaryOf), and the
// check's sentence leads it (Lead, OverruledSummary).

// firstSection returns where md's first section begins and ends, in bytes:
// from after its heading (or its first non-blank line, if it opens without
// one) to the next heading line, or the end.
func firstSection(md string) (start, end int) {
	heading := func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "#") }
	start = -1
	for at := 0; at < len(md); {
		next := len(md)
		if nl := strings.IndexByte(md[at:], '\n'); nl >= 0 {
			next = at + nl + 1
		}
		line := md[at:next]
		switch {
		case start < 0 && strings.TrimSpace(line) == "":
		case start < 0 && heading(line):
			start = next
		case start < 0:
			start = at
		case heading(line):
			return start, at
		}
		at = next
	}
	if start < 0 {
		start = len(md)
	}
	return start, len(md)
}

// SummaryOf returns the first section of a conclusion's Markdown (its
// Summary) without the heading: what a delivered message has room for.
func SummaryOf(markdown string) string {
	start, end := firstSection(markdown)
	return strings.TrimSpace(markdown[start:end])
}

// OverruledSummary leads the first section of md (its Summary) with the
// check's sentence (lead), and turns the model's own text of that section
// into a quotation under label, which says it is what the model proposed.
// The conclusion activity calls it; workflow code uses Lead, whose bytes
// recorded histories depend on.
func OverruledSummary(md, lead, label string) string {
	start, end := firstSection(md)
	section := lead + "\n\n" + label
	if body := strings.TrimSpace(md[start:end]); body != "" {
		var quoted []string
		for _, l := range strings.Split(body, "\n") {
			quoted = append(quoted, strings.TrimRight("> "+l, " "))
		}
		section += "\n\n" + strings.Join(quoted, "\n")
	}
	head := md[:start]
	if head != "" && !strings.HasSuffix(head, "\n") {
		head += "\n" // a heading without a line under it
	}
	if end < len(md) {
		section += "\n\n" + md[end:]
	}
	return head + section
}

// Lead puts note at the start of markdown's first section, after its
// heading if it opens with one: what SummaryOf takes, and a delivery
// carries, then begins with it. It adds as many bytes as note appended
// after a blank line would. Workflow code calls it: keep it pure, and its
// output the same bytes for every input (TestLeadKeepsItsBytes), which is
// why it finds the heading itself rather than with firstSection.
func Lead(markdown, note string) string {
	if note == "" {
		return markdown
	}
	body := strings.TrimLeft(markdown, " \t\r\n")
	if !strings.HasPrefix(body, "#") {
		return note + "\n\n" + markdown
	}
	at := len(markdown) - len(body)
	nl := strings.IndexByte(body, '\n')
	if nl < 0 {
		return markdown + "\n\n" + note
	}
	at += nl + 1
	for at < len(markdown) {
		// The blank lines under the heading stay above the note.
		next := strings.IndexByte(markdown[at:], '\n')
		if next < 0 || strings.TrimSpace(markdown[at:at+next]) != "" {
			break
		}
		at += next + 1
	}
	return markdown[:at] + note + "\n\n" + markdown[at:]
}
