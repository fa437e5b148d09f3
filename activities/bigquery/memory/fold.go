package memory

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// fold returns text as the claim check reads it: NFKC first (full-width and
// mathematical letters, ligatures, superscript digits and the one-dot leader
// become their plain forms), then typographic punctuation as ASCII, then
// letters of other scripts that look like Latin ones (Cyrillic "о", Greek
// "ο", Latin small capitals) as those Latin letters. lookalikes counts the
// letters of that last kind: English text about a table has none, so a
// claim with any is refused even when its folded form would pass.
func fold(text string) (folded string, lookalikes int) {
	var b strings.Builder
	for _, r := range norm.NFKC.String(text) {
		if p, ok := punctuation[r]; ok {
			b.WriteString(p)
			continue
		}
		if l, ok := confusables[r]; ok {
			b.WriteRune(l)
			lookalikes++
			continue
		}
		b.WriteRune(r)
	}
	return b.String(), lookalikes
}

// invisible reports characters that show nothing, or change how the text
// around them reads, and so have no place in a one-line claim: controls
// (line breaks and tabs too), format characters (zero-width spaces and
// joiners, bidirectional overrides, the soft hyphen), line and paragraph
// separators, variation selectors and tag characters.
func invisible(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Variation_Selector) ||
		(r >= 0xE0000 && r <= 0xE007F)
}

// punctuation maps the typographic marks a model writes for ASCII ones.
var punctuation = map[rune]string{
	'‘': "'", '’': "'", '‚': "'", '‛': "'", '′': "'",
	'“': `"`, '”': `"`, '„': `"`, '‟': `"`, '″': `"`,
	'‐': "-", '‑': "-", '‒': "-", '–': "-", '—': "-", '―': "-", '−': "-",
	'\u00a0': " ", '\u202f': " ",
}

// confusables maps letters of Cyrillic, Greek, Armenian and the Latin
// extensions that are drawn like a basic Latin letter to that letter (after
// Unicode's confusables.txt, the letters that matter for ASCII words).
var confusables = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'b', 'е': 'e', 'ё': 'e', 'һ': 'h', 'і': 'i', 'ї': 'i', 'ј': 'j', 'к': 'k', 'м': 'm', 'н': 'h',
	'о': 'o', 'п': 'n', 'р': 'p', 'с': 'c', 'т': 't', 'у': 'y', 'х': 'x', 'ѕ': 's', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w',
	'ɡ': 'g', 'ӏ': 'l', 'ү': 'y', 'ѵ': 'v', 'ԍ': 'g',
	'А': 'A', 'В': 'B', 'Е': 'E', 'Ё': 'E', 'Ѕ': 'S', 'І': 'I', 'Ї': 'I', 'Ј': 'J', 'К': 'K', 'М': 'M', 'Н': 'H',
	'О': 'O', 'Р': 'P', 'С': 'C', 'Т': 'T', 'У': 'Y', 'Х': 'X', 'Ү': 'Y', 'Ԛ': 'Q', 'Ԝ': 'W', 'Ԁ': 'D', 'Ӏ': 'I', 'Ь': 'b',
	// Greek
	'α': 'a', 'β': 'b', 'γ': 'y', 'ε': 'e', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'τ': 't', 'υ': 'u',
	'χ': 'x', 'ω': 'w', 'ϲ': 'c', 'ϳ': 'j',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O', 'Ρ': 'P',
	'Τ': 'T', 'Υ': 'Y', 'Χ': 'X', 'Ϲ': 'C',
	// Armenian
	'օ': 'o', 'ս': 'u', 'ո': 'n', 'հ': 'h', 'ց': 'g', 'զ': 'q', 'ե': 'e',
	// Latin extensions and small capitals
	'ı': 'i', 'ȷ': 'j', 'ɑ': 'a', 'ɩ': 'i', 'ɪ': 'i', 'ʟ': 'l', 'ᴀ': 'a', 'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e',
	'ɢ': 'g', 'ʜ': 'h', 'ᴊ': 'j', 'ᴋ': 'k', 'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p', 'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't',
	'ᴜ': 'u', 'ᴠ': 'v', 'ᴡ': 'w', 'ʏ': 'y', 'ᴢ': 'z', 'ǀ': 'l',
}
