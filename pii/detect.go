package pii

import "strings"

// The kinds of personal data Find detects. Each is also the KIND of its
// tokens, [KIND_n].
const (
	Email = "EMAIL"
	Phone = "PHONE"
	Card  = "CARD"
	IBAN  = "IBAN"
	SSN   = "SSN"
)

// Kinds lists every kind Find detects.
var Kinds = []string{Email, Phone, Card, IBAN, SSN}

// Match is one piece of personal data in a text: text[Start:End] == Value.
type Match struct {
	Kind       string
	Start, End int
	Value      string
}

// Find returns the personal data in text, in order and without overlaps.
// It errs on the side of missing a value rather than taking an ordinary
// number (a year, price, id, date, time, version or UUID) for one: numbers
// count only in a shape people write that kind of data in, and card numbers
// and IBANs only when their check digits are right. IP addresses are not
// personal data here. Text is treated as bytes: invalid UTF-8 is fine, and
// the cost is linear in len(text).
func Find(text string) []Match {
	emails := findEmails(text)
	var out []Match
	lo := 0
	for _, e := range emails {
		out = findNumbers(out, text, lo, e.Start)
		out = append(out, e)
		lo = e.End
	}
	return findNumbers(out, text, lo, len(text))
}

// Normalize returns the form of a detected value that decides whether two
// matches are the same value: lowercase for e-mail addresses, uppercase
// without spaces for IBANs, digits only for the rest (for an international
// phone number, without a "(0)" trunk prefix).
func Normalize(kind, value string) string {
	switch kind {
	case Email:
		return asciiLower(value)
	case IBAN:
		var b strings.Builder
		for i := 0; i < len(value); i++ {
			if c := value[i]; isAlnum(c) {
				b.WriteByte(upper(c))
			}
		}
		return b.String()
	case Phone:
		if strings.HasPrefix(value, "+") {
			value = strings.Replace(value, "(0)", "", 1)
		}
	}
	return digitsOf(value)
}

// ---- e-mail addresses ----

// emailLocal reports the bytes allowed in the local part: a practical
// subset of RFC 5322's atext (no quotes, slashes, '=' or '?', which would
// pull in the surroundings of addresses in URLs, code and shell words).
func emailLocal(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

func labelByte(c byte) bool { return isAlnum(c) || c == '-' }

// findEmails finds addresses local@domain with a dot-atom local part of at
// most 64 bytes and a domain of at least two labels ending in an
// alphabetic top-level domain. It looks only around '@' bytes.
func findEmails(text string) []Match {
	var out []Match
	last := 0
	for off := 0; off < len(text); {
		i := strings.IndexByte(text[off:], '@')
		if i < 0 {
			break
		}
		at := off + i
		off = at + 1
		s := at
		for s > last && at-s < 64 && emailLocal(text[s-1]) {
			s--
		}
		if s > last && emailLocal(text[s-1]) {
			continue // local part longer than 64 bytes
		}
		s += escapeLen(text, s) // "\njane@..." or "\u003cjane@..." in JSON
		for s < at && text[s] == '.' {
			s++
		}
		if s == at || text[at-1] == '.' || strings.Contains(text[s:at], "..") {
			continue
		}
		e := scanDomain(text, at+1)
		if e < 0 {
			continue
		}
		out = append(out, Match{Kind: Email, Start: s, End: e, Value: text[s:e]})
		last, off = e, e
	}
	return out
}

// fileExt holds file name extensions that are not (or hardly ever used as)
// top-level domains: "icon@2x.png" is a file, not an address.
var fileExt = map[string]bool{
	"png": true, "jpg": true, "jpeg": true, "gif": true, "svg": true, "webp": true, "ico": true, "bmp": true,
	"tif": true, "tiff": true, "avif": true, "heic": true, "pdf": true, "txt": true, "log": true, "json": true,
	"yaml": true, "yml": true, "xml": true, "html": true, "htm": true, "css": true, "js": true, "mjs": true,
	"cjs": true, "ts": true, "jsx": true, "tsx": true, "lock": true, "toml": true, "csv": true, "map": true,
}

// scanDomain returns the end of the longest valid domain starting at i, or
// -1.
func scanDomain(text string, i int) int {
	good := -1
	labels := 0
	for j := i; ; {
		k := j
		for k < len(text) && k-j <= 63 && labelByte(text[k]) {
			k++
		}
		if k == j || k-j > 63 || text[j] == '-' || text[k-1] == '-' {
			break
		}
		labels++
		if labels >= 2 && k-j >= 2 && allAlpha(text[j:k]) && !fileExt[asciiLower(text[j:k])] {
			good = k
		}
		if k+1 < len(text) && text[k] == '.' && labelByte(text[k+1]) {
			j = k + 1
			continue
		}
		break
	}
	if good < 0 {
		return -1
	}
	if good < len(text) {
		if c := text[good]; isWord(c) || c == '-' || c == '@' {
			return -1
		}
	}
	return good
}

// ---- numbers ----

// maxMatch bounds the bytes a phone, card, SSN or IBAN match may span.
const maxMatch = 64

// detectors, most specific kind first: each returns the end of its match
// starting at p in text, or -1.
var detectors = []struct {
	kind string
	at   func(text string, p int) int
}{
	{SSN, ssnAt},
	{Card, cardAt},
	{IBAN, ibanAt},
	{Phone, phoneAt},
}

// findNumbers appends the phone, card, SSN and IBAN matches in text[lo:hi]
// (the text between e-mail addresses, which bounds them). Matches start
// only where a word starts; at each such place the longest match of any
// kind is taken (on a tie, the more specific kind), and otherwise the whole
// word is skipped, so no part of an id or a version number is taken for
// data on its own.
func findNumbers(out []Match, text string, lo, hi int) []Match {
	t := text[lo:hi]
	for p := 0; p < len(t); {
		c := t[p]
		if n := escapeLen(t, p); n > 0 {
			p += n
			continue
		}
		if !(isAlnum(c) || c == '+' || c == '(') || !(leftOK(t, p) || (c == '+' && plusOK(t, p))) {
			p++
			continue
		}
		if isAlpha(c) && !(p+3 < len(t) && isAlpha(t[p+1]) && isDigit(t[p+2]) && isDigit(t[p+3])) {
			p = skipToken(t, p, len(t)) // a word that cannot start an IBAN, the one kind starting with a letter
			continue
		}
		kind, end := "", -1
		for _, d := range detectors {
			if e := d.at(t, p); e > end {
				kind, end = d.kind, e
			}
		}
		if end > p {
			out = append(out, Match{Kind: kind, Start: lo + p, End: lo + end, Value: t[p:end]})
			p = end
			continue
		}
		p = skipToken(t, p, len(t))
	}
	return out
}

func digitRun(text string, p int) int {
	i := p
	for i < len(text) && isDigit(text[i]) {
		i++
	}
	return i - p
}

func ssnAt(text string, p int) int {
	e := p + 11
	if e > len(text) || text[p+3] != '-' || text[p+6] != '-' ||
		digitRun(text, p) != 3 || digitRun(text, p+4) != 2 || digitRun(text, p+7) != 4 {
		return -1
	}
	return checkSSN(text, p, e)
}

func cardAt(text string, p int) int {
	n := digitRun(text, p)
	switch {
	case n >= 13 && n <= 19:
		return checkCard(text, p, p+n)
	case n == 4 && p+5 < len(text) && (text[p+4] == ' ' || text[p+4] == '-') && isDigit(text[p+5]):
		// dddd then 2-4 groups of 3-6 digits, split by the same separator.
		sep, i, e := text[p+4], p+4, -1
		for k := 0; k < 4 && i < len(text) && text[i] == sep; k++ {
			m := digitRun(text, i+1)
			if m < 3 || m > 6 {
				break
			}
			i += 1 + m
			if k >= 1 {
				e = i
			}
		}
		if e > 0 {
			return checkCard(text, p, e)
		}
	}
	return -1
}

func ibanAt(text string, p int) int {
	if p+4 > len(text) || !isAlpha(text[p]) || !isAlpha(text[p+1]) || !isDigit(text[p+2]) || !isDigit(text[p+3]) {
		return -1
	}
	if _, ok := ibanLengths[string([]byte{upper(text[p]), upper(text[p+1])})]; !ok {
		return -1
	}
	// Compact: 11-30 letters and digits after the check digits. Grouped:
	// 2-7 groups of four, then maybe one of 1-4, split by single spaces.
	i := p + 4
	switch n := alnumRun(text, i); {
	case n >= 11 && n <= 30:
		return checkIBAN(text, p, i+n)
	case n > 0:
		return -1
	}
	groups := 0
	for ; groups < 7 && i < len(text) && text[i] == ' ' && alnumRun(text, i+1) == 4; groups++ {
		i += 5
	}
	if groups < 2 {
		return -1
	}
	if i < len(text) && text[i] == ' ' {
		if m := alnumRun(text, i+1); m >= 1 && m <= 4 {
			i += 1 + m
		}
	}
	return checkIBAN(text, p, i)
}

func alnumRun(text string, p int) int {
	i := p
	for i < len(text) && isAlnum(text[i]) {
		i++
	}
	return i - p
}

func phoneAt(text string, p int) int {
	var end func(string, int) int
	c := text[p]
	switch {
	case p+1 >= len(text):
		return -1
	case c == '+' && text[p+1] >= '1' && text[p+1] <= '9': // no country code starts with 0
		if !plusOK(text, p) {
			return -1
		}
		return checkPhone(text, p, intlPhoneEnd(text, p))
	case c == '(' && text[p+1] == '0':
		end = nationalPhoneEnd
	case c == '(' && isDigit(text[p+1]):
		end = nanpPhoneEnd
	case isDigit(c):
		n := digitRun(text, p)
		if p+n >= len(text) {
			return -1
		}
		next := text[p+n]
		switch {
		case c == '0' && n >= 2 && n <= 5 && isNumSep(next):
			end = nationalPhoneEnd
		case (n == 3 || (n == 1 && c == '1')) && (next == ' ' || next == '.' || next == '-'):
			end = nanpPhoneEnd
		default:
			return -1
		}
	default:
		return -1
	}
	if e := end(text, p); e > 0 {
		return checkPhone(text, p, e)
	}
	return -1
}

// nationalPhoneEnd returns the end of the shape of a national number at p
// with a trunk 0: 0 and 1-4 digits, maybe in parentheses, then 1-4 groups
// of 2-8 digits, each after a space, dot, dash or slash; or -1.
func nationalPhoneEnd(text string, p int) int {
	i := p
	paren := text[i] == '('
	if paren {
		i++
	}
	if n := digitRun(text, i); n < 2 || n > 5 || text[i] != '0' {
		return -1
	}
	i += digitRun(text, i)
	if paren {
		if i >= len(text) || text[i] != ')' {
			return -1
		}
		i++
	}
	e := -1
	for k := 0; k < 4 && i < len(text) && isNumSep(text[i]); k++ {
		m := digitRun(text, i+1)
		if m < 2 || m > 8 {
			break
		}
		i += 1 + m
		e = i
	}
	return e
}

// nanpPhoneEnd returns the end of the shape of a North American number at
// p: maybe 1 and a separator, then 3 digits in parentheses (and maybe a
// separator) or 3 digits and a separator, 3 digits, a separator, 4
// digits; or -1. Separators are a space, dot or dash.
func nanpPhoneEnd(text string, p int) int {
	sep := func(i int) bool { return i < len(text) && (text[i] == ' ' || text[i] == '.' || text[i] == '-') }
	i := p
	if text[i] == '1' && sep(i+1) && i+2 < len(text) && (isDigit(text[i+2]) || text[i+2] == '(') {
		i += 2
	}
	switch {
	case text[i] == '(':
		if digitRun(text, i+1) != 3 || i+4 >= len(text) || text[i+4] != ')' {
			return -1
		}
		i += 5
		if sep(i) {
			i++
		}
	case digitRun(text, i) == 3 && sep(i+3):
		i += 4
	default:
		return -1
	}
	if digitRun(text, i) != 3 || !sep(i+3) {
		return -1
	}
	i += 4
	if digitRun(text, i) < 4 {
		return -1
	}
	return i + 4
}

// plusOK reports whether a '+' at p may start a phone number: after a
// space, an opening bracket or quote, or '=', ':', ',' or ';', but not in
// arithmetic ("e[1]+3545052371", "C++20 17.12.2").
func plusOK(text string, p int) bool {
	if p == 0 || afterEscape(text, p) {
		return true
	}
	return strings.IndexByte(" \t\r\n\"'`(<[{=:,;", text[p-1]) >= 0
}

// intlPhoneEnd returns the end of the shape of an international number at
// p: '+', digits, then groups of digits or of 1-5 digits in parentheses,
// each after an optional space, dot or dash; at most maxMatch bytes.
func intlPhoneEnd(text string, p int) int {
	hi := min(len(text), p+maxMatch)
	i := p + 1 + digitRun(text[:hi], p+1)
	for i < hi {
		j := i
		if c := text[j]; c == ' ' || c == '.' || c == '-' {
			j++
		}
		switch {
		case j < hi && isDigit(text[j]):
			i = j + digitRun(text[:hi], j)
			continue
		case j < hi && text[j] == '(':
			if n := digitRun(text[:hi], j+1); n >= 1 && n <= 5 && j+1+n < hi && text[j+1+n] == ')' {
				i = j + n + 2
				continue
			}
		}
		break
	}
	return i
}

// skipToken returns where to look on after a word at s that starts no
// match: past the word, letters and digits joined by '.', '-', '/' or ':'.
func skipToken(text string, s, hi int) int {
	i := s + 1
	for i < hi && (isWord(text[i]) || (isJoiner(text[i]) && i+1 < hi && isAlnum(text[i+1]))) {
		i++
	}
	return i
}

func isJoiner(c byte) bool { return c == '.' || c == '-' || c == '/' || c == ':' }

// leftOK reports whether a match may start at i: not inside a word, and
// not after a word joined on by '.', '-', '/' or ':' ("ORD-2024", "v1.2",
// "04:05:06.789", "fd:01").
func leftOK(text string, i int) bool {
	if i == 0 {
		return true
	}
	c := text[i-1]
	if isWord(c) {
		return afterEscape(text, i)
	}
	return !(isJoiner(c) && i >= 2 && isAlnum(text[i-2]))
}

// escapeLen returns the length of the rest of a JSON (or C) escape whose
// backslash is just before p: 1 for \n, \r, \t, \b and \f, 5 for \uXXXX,
// else 0. Text taken from JSON has values right after escapes
// ("\n555-123-4567", Go's "\u003cjane@example.com\u003e").
func escapeLen(text string, p int) int {
	if p == 0 || text[p-1] != '\\' || p >= len(text) {
		return 0
	}
	switch text[p] {
	case 'n', 'r', 't', 'b', 'f':
		return 1
	case 'u':
		if p+5 <= len(text) && isHex(text[p+1]) && isHex(text[p+2]) && isHex(text[p+3]) && isHex(text[p+4]) {
			return 5
		}
	}
	return 0
}

// afterEscape reports whether an escape (see escapeLen) ends at i.
func afterEscape(text string, i int) bool {
	return (i >= 2 && escapeLen(text, i-1) == 1) || (i >= 6 && escapeLen(text, i-5) == 5)
}

func isHex(c byte) bool { return isDigit(c) || ((c|0x20) >= 'a' && (c|0x20) <= 'f') }

// rightOK is leftOK for a match ending at j.
func rightOK(text string, j int) bool {
	if j >= len(text) {
		return true
	}
	c := text[j]
	if isWord(c) {
		return false
	}
	return !(isJoiner(c) && j+1 < len(text) && isAlnum(text[j+1]))
}

// isolated reports whether text[s:e] is not one group of a longer run of
// numbers ("01 02 03 04 05 06" in a hex dump).
func isolated(text string, s, e int) bool {
	if s >= 2 && isNumSep(text[s-1]) && isDigit(text[s-2]) {
		return false
	}
	if e+1 < len(text) && isNumSep(text[e]) && isDigit(text[e+1]) {
		return false
	}
	return true
}

// inHexDump reports whether text[s:e] sits next to hex bytes or offsets
// ("4b 3f cc 04 67 22 62 47  e7 76", "00000000  05 36 32 93 77"): the
// word before or after it, across at most two spaces, is two hex digits,
// or four or more with a digit among them.
func inHexDump(text string, s, e int) bool {
	i := s
	for n := 0; n < 2 && i > 0 && text[i-1] == ' '; n++ {
		i--
	}
	j := i
	for j > 0 && isAlnum(text[j-1]) {
		j--
	}
	if i < s && hexWord(text[j:i]) {
		return true
	}
	i = e
	for n := 0; n < 2 && i < len(text) && text[i] == ' '; n++ {
		i++
	}
	j = i
	for j < len(text) && isAlnum(text[j]) {
		j++
	}
	return i > e && hexWord(text[i:j])
}

func hexWord(w string) bool {
	if len(w) < 2 || len(w) == 3 {
		return false
	}
	digit := false
	for i := 0; i < len(w); i++ {
		if !isHex(w[i]) {
			return false
		}
		digit = digit || isDigit(w[i])
	}
	return len(w) == 2 || digit
}
