// Package glob is the syntax of artifact patterns: slash-separated paths
// relative to /workspace whose segments are path.Match patterns, where a
// segment "**" matches any number of directories.
package glob

import (
	"errors"
	"path"
	"strings"
)

// Validate checks an artifact pattern: a slash-separated path relative
// to /workspace whose segments are path.Match patterns, where a segment "**"
// matches any number of directories.
func Validate(g string) error {
	if g == "" {
		return errors.New("pattern must not be empty")
	}
	if strings.HasPrefix(g, "/") {
		return errors.New("pattern must be relative to /workspace")
	}
	if strings.ContainsRune(g, 0) || len(g) > 1024 {
		return errors.New("pattern is invalid")
	}
	for _, seg := range strings.Split(g, "/") {
		if seg == ".." {
			return errors.New(`pattern must not contain ".."`)
		}
		if seg == "**" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return errors.New("pattern is malformed: " + err.Error())
		}
	}
	return nil
}

// Match reports whether the clean relative path p matches pattern g (see
// Validate). "out/**" matches every file below out/; "**/*.png" matches
// PNG files at any depth.
func Match(g, p string) bool {
	return matchSegs(strings.Split(g, "/"), strings.Split(p, "/"))
}

func matchSegs(g, p []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			rest := g[1:]
			if len(rest) == 0 {
				return len(p) > 0
			}
			for i := 0; i <= len(p); i++ {
				if matchSegs(rest, p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, _ := path.Match(g[0], p[0]); !ok {
			return false
		}
		g, p = g[1:], p[1:]
	}
	return len(p) == 0
}
