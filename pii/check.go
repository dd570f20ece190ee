package pii

import "strings"

// The checks that tell personal data from numbers that only look like it:
// each candidate the detectors found is kept only when its kind's rules
// hold (the checksums of cards and IBANs, the numbers never issued as
// SSNs, the shapes of phone numbers and what rules dates out).

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
// one kind of separator, with the prefix and length of a card network,
// passing Luhn.
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
	// The groups may run on past the card ("4111 1111 1111 1111 123",
	// with the CVC after it): try ending after each group, longest first.
	var buf [32]byte
	for end := e; end-s >= 13; {
		if rightOK(text, end) {
			d := buf[:0]
			for i := s; i < end; i++ {
				switch ch := text[i]; {
				case isDigit(ch):
					d = append(d, ch)
				case ch != c:
					return -1 // mixed separators
				}
			}
			if validCard(string(d)) {
				return end
			}
		}
		end = s + strings.LastIndexByte(text[s:end], c)
	}
	return -1
}

func validCard(d string) bool {
	if len(d) < 13 || len(d) > 19 || !cardNetwork(d) || strings.Count(d, d[:1]) == len(d) {
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

// cardNetwork reports whether d has the prefix (IIN) and length of a card
// of a major network. Random numbers rarely do: timestamps, ids and hashes
// that happen to pass Luhn are not taken for cards.
func cardNetwork(d string) bool {
	n := len(d)
	p2, p3, p4 := num(d[:2]), num(d[:3]), num(d[:4])
	switch {
	case d[0] == '4': // Visa
		return n == 13 || n == 16 || n == 19
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720: // Mastercard
		return n == 16
	case p2 == 34 || p2 == 37: // American Express
		return n == 15
	case p4 == 6011, p3 >= 644 && p3 <= 649, p2 == 65: // Discover
		return n >= 16
	case p4 >= 3528 && p4 <= 3589: // JCB
		return n >= 16
	case p3 >= 300 && p3 <= 305, p2 == 36, p2 == 38, p2 == 39: // Diners Club
		return n >= 14
	case p2 == 62: // UnionPay
		return n >= 16
	case p4 >= 2200 && p4 <= 2204: // Mir
		return n >= 16
	case p4 == 5018, p4 == 5020, p4 == 5038, p4 == 5893, p4 == 6304, p4 == 6759, p4 >= 6761 && p4 <= 6763: // Maestro
		return true
	}
	return false
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
	if !leftOK(text, s) && !(text[s] == '+' && plusOK(text, s)) {
		return -1
	}
	if text[s] != '+' && (!rightOK(text, e) || !isolated(text, s, e)) {
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
		if inHexDump(text, s, e) || !checkNationalPhone(gs) {
			return -1
		}
		return e
	default:
		if !checkNANP(gs) {
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
// international prefix, nor a hex dump's 00 00 00), 10-12 digits (a ZIP+4
// code, 02110-1301, has 9), groups split by spaces, dashes, or one slash;
// dots only on their own and more than one (06.7891234 is a decimal).
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
	if digits < 10 || digits > 12 || slashes > 1 || dots == 1 || (dots > 0 && (others > 0 || slashes > 0)) {
		return false
	}
	return true
}

// checkNANP: [1] area exchange line, the area code valid (first digit 2-9,
// second not 9, not N11), split by dashes or dots, the same throughout,
// or with the area code in parentheses. Spaces alone are not enough: "256
// 512 1024" is a row of numbers.
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
	if gs[2].sep != '-' && gs[2].sep != '.' && !(gs[0].paren && gs[2].sep == ' ') {
		return false
	}
	return gs[0].paren || gs[1].sep == gs[2].sep
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
