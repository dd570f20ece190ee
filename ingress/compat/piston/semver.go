package piston

import (
	"strconv"
	"strings"
)

// satisfies says whether version (x.y.z) is in the range, as npm's
// semver.satisfies reads the ranges Piston's clients send: "*" or "x",
// exact and partial versions ("3.11.2", "3.11", "3.x"), comparators
// (>=, <=, >, <, =), caret and tilde ranges, hyphen ranges, comparators
// joined by spaces (all must hold) and alternatives joined by "||".
func satisfies(version, rng string) bool {
	v, ok := parseVersion(version)
	if !ok {
		return false
	}
	for _, alt := range strings.Split(rng, "||") {
		if setHolds(v, strings.Fields(alt)) {
			return true
		}
	}
	return false
}

type semver [3]int

func parseVersion(s string) (semver, bool) {
	var v semver
	parts := strings.SplitN(strings.TrimPrefix(s, "v"), ".", 3)
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		if j := strings.IndexAny(p, "-+"); j >= 0 {
			p = p[:j]
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func cmp(a, b semver) int {
	for i := range 3 {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// partial is a version with wildcards: n is how many parts were given.
type partial struct {
	v semver
	n int
}

func parsePartial(s string) (partial, bool) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "v"), "=")
	if s == "" || s == "*" || s == "x" || s == "X" {
		return partial{}, true
	}
	var p partial
	for i, part := range strings.SplitN(s, ".", 3) {
		if j := strings.IndexAny(part, "-+"); j >= 0 && i == 2 {
			part = part[:j]
		}
		if part == "*" || part == "x" || part == "X" {
			break
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return p, false
		}
		p.v[i], p.n = n, i+1
	}
	return p, true
}

// upper is the first version past the partial's range ("1.2" → 1.3.0).
func (p partial) upper() semver {
	u := p.v
	switch p.n {
	case 1:
		u = semver{p.v[0] + 1, 0, 0}
	case 2:
		u = semver{p.v[0], p.v[1] + 1, 0}
	case 3:
		u = semver{p.v[0], p.v[1], p.v[2] + 1}
	}
	return u
}

func setHolds(v semver, tokens []string) bool {
	if len(tokens) == 3 && tokens[1] == "-" { // hyphen range
		lo, ok1 := parsePartial(tokens[0])
		hi, ok2 := parsePartial(tokens[2])
		if !ok1 || !ok2 {
			return false
		}
		return cmp(v, lo.v) >= 0 && (hi.n == 0 || cmp(v, hi.upper()) < 0)
	}
	for _, t := range tokens {
		if !holds(v, t) {
			return false
		}
	}
	return true
}

func holds(v semver, t string) bool {
	op := ""
	for _, o := range []string{">=", "<=", ">", "<", "=", "^", "~"} {
		if strings.HasPrefix(t, o) {
			op, t = o, t[len(o):]
			break
		}
	}
	p, ok := parsePartial(t)
	if !ok {
		return false
	}
	switch op {
	case "", "=":
		return p.n == 0 || (cmp(v, p.v) >= 0 && cmp(v, p.upper()) < 0)
	case ">=":
		return cmp(v, p.v) >= 0
	case ">":
		switch {
		case p.n == 0:
			return false
		case p.n < 3:
			return cmp(v, p.upper()) >= 0
		}
		return cmp(v, p.v) > 0
	case "<=":
		return p.n == 0 || cmp(v, p.upper()) < 0
	case "<":
		return p.n > 0 && cmp(v, p.v) < 0
	case "~":
		if p.n <= 1 {
			return p.n == 0 || (cmp(v, p.v) >= 0 && cmp(v, p.upper()) < 0)
		}
		return cmp(v, p.v) >= 0 && cmp(v, semver{p.v[0], p.v[1] + 1, 0}) < 0
	case "^":
		if p.n == 0 {
			return true
		}
		var hi semver
		switch {
		case p.v[0] > 0 || p.n == 1:
			hi = semver{p.v[0] + 1, 0, 0}
		case p.v[1] > 0 || p.n == 2:
			hi = semver{0, p.v[1] + 1, 0}
		default:
			hi = semver{0, 0, p.v[2] + 1}
		}
		return cmp(v, p.v) >= 0 && cmp(v, hi) < 0
	}
	return false
}
