package pii

import (
	"regexp"
	"strings"
)

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
		if labels >= 2 && k-j >= 2 && allAlpha(text[j:k]) {
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

// Anchored shapes, tried only where a cheap look at the first bytes says
// one may start, on at most maxMatch bytes.
var (
	nationalPhoneRE = regexp.MustCompile(`^\(?0\d{1,4}\)?(?:[ .\-/]\d{2,8}){1,4}`)
	nanpPhoneRE     = regexp.MustCompile(`^(?:1[ .\-])?(?:\(\d{3}\)[ .\-]?|\d{3}[ .\-])\d{3}[ .\-]\d{4}`)
	groupedCardRE   = regexp.MustCompile(`^\d{4}(?:[ \-]\d{3,6}){2,4}`)
	ibanRE          = regexp.MustCompile(`^[A-Za-z]{2}\d{2}(?:[A-Za-z0-9]{11,30}|(?: [A-Za-z0-9]{4}){2,7}(?: [A-Za-z0-9]{1,4})?)`)
)

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
		if !(isAlnum(c) || c == '+' || c == '(') || !leftOK(t, p) {
			p++
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

// matchAt returns the end of re's (anchored) match at p, or -1.
func matchAt(re *regexp.Regexp, text string, p int) int {
	loc := re.FindStringIndex(text[p:min(len(text), p+maxMatch)])
	if loc == nil {
		return -1
	}
	return p + loc[1]
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
		if e := matchAt(groupedCardRE, text, p); e > 0 {
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
	if e := matchAt(ibanRE, text, p); e > 0 {
		return checkIBAN(text, p, e)
	}
	return -1
}

func phoneAt(text string, p int) int {
	var re *regexp.Regexp
	c := text[p]
	switch {
	case p+1 >= len(text):
		return -1
	case c == '+' && isDigit(text[p+1]):
		return checkPhone(text, p, intlPhoneEnd(text, p))
	case c == '(' && text[p+1] == '0':
		re = nationalPhoneRE
	case c == '(' && isDigit(text[p+1]):
		re = nanpPhoneRE
	case isDigit(c):
		n := digitRun(text, p)
		if p+n >= len(text) {
			return -1
		}
		next := text[p+n]
		switch {
		case c == '0' && n >= 2 && n <= 5 && (isNumSep(next) || next == ')'):
			re = nationalPhoneRE
		case (n == 3 || (n == 1 && c == '1')) && (next == ' ' || next == '.' || next == '-'):
			re = nanpPhoneRE
		default:
			return -1
		}
	default:
		return -1
	}
	if e := matchAt(re, text, p); e > 0 {
		return checkPhone(text, p, e)
	}
	return -1
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
// match: past the word, letters and digits joined by '.', '-' or '/'.
func skipToken(text string, s, hi int) int {
	i := s + 1
	for i < hi && (isWord(text[i]) || (isJoiner(text[i]) && i+1 < hi && isAlnum(text[i+1]))) {
		i++
	}
	return i
}

func isJoiner(c byte) bool { return c == '.' || c == '-' || c == '/' }

// leftOK reports whether a match may start at i: not inside a word, and
// not after a word joined on by '.', '-' or '/' ("ORD-2024", "v1.2").
func leftOK(text string, i int) bool {
	if i == 0 {
		return true
	}
	c := text[i-1]
	if isWord(c) {
		return false
	}
	return !(isJoiner(c) && i >= 2 && isAlnum(text[i-2]))
}

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

func isNumSep(c byte) bool { return c == ' ' || c == '.' || c == '-' || c == '/' }

// SSN: ddd-dd-dddd, without the numbers never issued.
func checkSSN(text string, s, e int) int {
	if !leftOK(text, s) || !rightOK(text, e) {
		return -1
	}
	v := text[s:e]
	area, group, serial := v[0:3], v[4:6], v[7:11]
	if area == "000" || area == "666" || area[0] == '9' || group == "00" || serial == "0000" {
		return -1
	}
	return e
}

// Card: 13-19 digits, in one run or in groups (the first of 4) split by
// one kind of separator, starting with 2-6 (no card network starts with
// 0, 1, 7, 8 or 9; millisecond timestamps start with 1), passing Luhn.
func checkCard(text string, s, e int) int {
	if !leftOK(text, s) {
		return -1
	}
	v := text[s:e]
	sep := strings.IndexAny(v, " -")
	if sep < 0 {
		if rightOK(text, e) && validCard(v) {
			return e
		}
		return -1
	}
	c := v[sep]
	if strings.Count(v, string(c)) != strings.Count(v, " ")+strings.Count(v, "-") {
		return -1 // mixed separators
	}
	// The regexp takes as many groups as it can; a shorter run of groups
	// may be the card ("4111 1111 1111 1111 123" with a CVC after it).
	groups := strings.Split(v, string(c))
	for n := len(groups); n >= 3; n-- {
		end := s + len(strings.Join(groups[:n], string(c)))
		if rightOK(text, end) && validCard(digitsOf(text[s:end])) {
			return end
		}
	}
	return -1
}

func validCard(d string) bool {
	if len(d) < 13 || len(d) > 19 || d[0] < '2' || d[0] > '6' || strings.Count(d, d[:1]) == len(d) {
		return false
	}
	sum, dbl := 0, false
	for i := len(d) - 1; i >= 0; i-- {
		x := int(d[i] - '0')
		if dbl {
			if x *= 2; x > 9 {
				x -= 9
			}
		}
		sum += x
		dbl = !dbl
	}
	return sum%10 == 0
}

// IBAN: country code, check digits and BBAN, compact or in groups of four
// split by single spaces, of the length its country uses, passing mod-97.
func checkIBAN(text string, s, e int) int {
	if !leftOK(text, s) {
		return -1
	}
	v := text[s:e]
	want, ok := ibanLengths[string([]byte{upper(v[0]), upper(v[1])})]
	if !ok {
		return -1
	}
	end := -1
	if strings.IndexByte(v, ' ') < 0 {
		if len(v) == want {
			end = e
		}
	} else {
		// Take groups until they make the country's length.
		n := 0
		for i := 0; i <= len(v) && n <= want; i++ {
			if i == len(v) || v[i] == ' ' {
				if n == want {
					end = s + i
					break
				}
				continue
			}
			n++
		}
	}
	if end < 0 || !rightOK(text, end) {
		return -1
	}
	if !validIBAN(Normalize(IBAN, text[s:end])) {
		return -1
	}
	return end
}

func validIBAN(s string) bool {
	r := s[4:] + s[:4]
	rem := 0
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case isDigit(c):
			rem = (rem*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			rem = (rem*100 + int(c-'A'+10)) % 97
		default:
			return false
		}
	}
	return rem == 1
}

// ibanLengths is the IBAN length of each country in the IBAN registry.
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
	"BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
	"DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
	"FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
	"GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
	"IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
	"LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20,
	"MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
	"PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
	"SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
	"SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
	"YE": 30,
}

// Phone: international (+CC ...), national with a trunk 0 (020 7946 0958),
// or North American ((555) 123-4567).
func checkPhone(text string, s, e int) int {
	if !leftOK(text, s) {
		return -1
	}
	gs, ok := phoneGroups(text[s:e])
	if !ok {
		return -1
	}
	switch {
	case text[s] == '+':
		return checkIntlPhone(text, s, gs)
	case text[s] == '0' || text[s:s+2] == "(0":
		if !rightOK(text, e) || !isolated(text, s, e) || !checkNationalPhone(gs) {
			return -1
		}
		return e
	default:
		if !rightOK(text, e) || !isolated(text, s, e) || !checkNANP(gs) {
			return -1
		}
		return e
	}
}

// phoneGroup is a run of digits in a phone number, possibly in
// parentheses, with the separator before it (0: none).
type phoneGroup struct {
	digits string
	paren  bool
	sep    byte
	end    int // offset just past the group (and its ')')
}

func phoneGroups(v string) ([]phoneGroup, bool) {
	var gs []phoneGroup
	var sep byte
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case c == '+' && i == 0:
			i++
		case c == '(':
			j := i + 1
			for j < len(v) && isDigit(v[j]) {
				j++
			}
			if j == i+1 || j >= len(v) || v[j] != ')' {
				return nil, false
			}
			gs = append(gs, phoneGroup{digits: v[i+1 : j], paren: true, sep: sep, end: j + 1})
			sep = 0
			i = j + 1
		case isDigit(c):
			j := i
			for j < len(v) && isDigit(v[j]) {
				j++
			}
			gs = append(gs, phoneGroup{digits: v[i:j], sep: sep, end: j})
			sep = 0
			i = j
		case c == ' ' || c == '.' || c == '-' || c == '/':
			sep = c
			i++
		default: // a ')' without its '('
			return nil, false
		}
	}
	return gs, len(gs) > 0
}

// checkIntlPhone takes the longest run of groups from the start that makes
// a plausible number: 7-15 digits (exactly 11 for +1), at most one group of
// a single digit after the country code, at most one group in parentheses.
func checkIntlPhone(text string, s int, gs []phoneGroup) int {
	for n := len(gs); n >= 1; n-- {
		g := gs[:n]
		end := s + g[n-1].end
		if !rightOK(text, end) || looksLikeDate(g) {
			continue
		}
		digits, singles, parens, dots := 0, 0, 0, 0
		for i, x := range g {
			if x.paren {
				parens++
				if x.digits == "0" {
					continue // trunk prefix: +44 (0)20 ...
				}
			} else if i > 0 && len(x.digits) == 1 {
				singles++
			}
			if x.sep == '.' {
				dots++
			}
			digits += len(x.digits)
		}
		if parens > 1 || singles > 1 {
			continue
		}
		if dots == 1 && n == 2 {
			continue // +1234567.89 is a signed decimal
		}
		if g[0].digits[0] == '1' {
			if digits != 11 {
				continue
			}
		} else if digits < 7 || digits > 15 || (n == 1 && digits < 9) {
			continue
		}
		return end
	}
	return -1
}

// checkNationalPhone: a trunk 0 then the area code (not 00, the
// international prefix, nor a hex dump's 00 00 00), 9-12 digits, groups
// split by spaces, dashes, or one slash; dots only on their own.
func checkNationalPhone(gs []phoneGroup) bool {
	d0 := gs[0].digits
	if len(d0) < 2 || d0[0] != '0' || d0[1] == '0' || len(gs) < 2 || looksLikeDate(gs) {
		return false
	}
	digits, slashes, dots, others := 0, 0, 0, 0
	for i, g := range gs {
		digits += len(g.digits)
		if g.paren && i > 0 {
			return false
		}
		switch {
		case i == 0:
		case g.sep == '/':
			slashes++
		case g.sep == '.':
			dots++
		default:
			others++
		}
	}
	if digits < 9 || digits > 12 || slashes > 1 || (dots > 0 && (others > 0 || slashes > 0)) {
		return false
	}
	return true
}

// checkNANP: [1] area exchange line, the area code valid (first digit 2-9,
// second not 9, not N11), the same separator throughout unless the area
// code is in parentheses.
func checkNANP(gs []phoneGroup) bool {
	if len(gs) == 4 {
		if gs[0].digits != "1" {
			return false
		}
		gs = gs[1:]
	}
	if len(gs) != 3 || len(gs[0].digits) != 3 || len(gs[1].digits) != 3 || len(gs[2].digits) != 4 {
		return false
	}
	a := gs[0].digits
	if a[0] < '2' || a[1] == '9' || a[1:] == "11" || gs[1].digits[1:] == "11" {
		return false
	}
	if !gs[0].paren && gs[1].sep != gs[2].sep {
		return false
	}
	return gs[1].sep != '/' && gs[2].sep != '/'
}

// looksLikeDate reports whether the first three groups read as a date:
// year-month-day, day.month.year or month/day/year.
func looksLikeDate(gs []phoneGroup) bool {
	if len(gs) < 3 {
		return false
	}
	a, b, c := gs[0].digits, gs[1].digits, gs[2].digits
	if len(b) > 2 || num(b) < 1 || num(b) > 31 {
		return false
	}
	if len(a) == 4 && len(c) <= 2 {
		return isYear(a) && num(b) <= 12 && num(c) >= 1 && num(c) <= 31
	}
	if len(c) == 4 && len(a) <= 2 {
		return isYear(c) && num(a) >= 1 && num(a) <= 31
	}
	return false
}

func isYear(s string) bool { return s[:2] == "19" || s[:2] == "20" }

func num(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// ---- bytes ----

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func isAlnum(c byte) bool { return isDigit(c) || isAlpha(c) }
func isWord(c byte) bool  { return isAlnum(c) || c == '_' }

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 0x20
	}
	return c
}

func allAlpha(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isAlpha(s[i]) {
			return false
		}
	}
	return true
}

func digitsOf(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			b = append(b, s[i])
		}
	}
	return string(b)
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 0x20
		}
	}
	return string(b)
}
