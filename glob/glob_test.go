package glob

import "testing"

func TestMatch(t *testing.T) {
	cases := []struct {
		glob, path string
		want       bool
	}{
		{"out/**", "out/a.png", true},
		{"out/**", "out/x/y/z.csv", true},
		{"out/**", "out", false},
		{"out/**", "outside/a", false},
		{"**/*.png", "a.png", true},
		{"**/*.png", "x/y/a.png", true},
		{"**/*.png", "x/y/a.csv", false},
		{"*.csv", "a.csv", true},
		{"*.csv", "d/a.csv", false},
		{"out/*/r.txt", "out/1/r.txt", true},
	}
	for _, c := range cases {
		if got := Match(c.glob, c.path); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.glob, c.path, got, c.want)
		}
	}
}
