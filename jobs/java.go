package jobs

import (
	"regexp"
	"strings"
)

// A Java source file must be named after its public top-level class, and
// the JVM is started with the class that holds main. A judge's client
// sends one file of code and no names, so both are read from the code:
// javaClasses skips comments, strings and character literals, tracks the
// braces, and notes the package, the top-level types and which of them
// declares a static main method.

var (
	javaPackageRE = regexp.MustCompile(`^\s*package\s+([\p{L}_$][\p{L}\p{N}_$]*(?:\s*\.\s*[\p{L}_$][\p{L}\p{N}_$]*)*)\s*;`)
	javaTypeRE    = regexp.MustCompile(`^((?:(?:public|final|abstract|sealed|non-sealed|strictfp|static)\s+)*)(?:class|interface|enum|record)\s+([\p{L}_$][\p{L}\p{N}_$]*)`)
	javaMainRE    = regexp.MustCompile(`^static\s+(?:final\s+)?void\s+main\s*\(`)
	javaNameRE    = regexp.MustCompile(`^[\p{L}_$][\p{L}\p{N}_$]*$`)
)

// javaClasses returns the file name (without .java) and the fully
// qualified main class for a Java program: the public top-level type
// names the file, and the top-level type declaring static main is run.
// Either falls back on the other, and both on "Main".
func javaClasses(code string) (file, main string) {
	src := javaCode(code)
	pkg := ""
	if m := javaPackageRE.FindStringSubmatch(src); m != nil {
		pkg = strings.Join(strings.Fields(strings.ReplaceAll(m[1], ".", " ")), ".")
	}
	var public, withMain string
	depth, current := 0, ""
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '{':
			depth++
		case c == '}':
			if depth > 0 {
				depth--
			}
		case depth == 0 && (i == 0 || !isJavaIdent(src[i-1])):
			if m := javaTypeRE.FindStringSubmatch(src[i:]); m != nil {
				current = m[2]
				if strings.Contains(" "+m[1], " public ") && public == "" {
					public = current
				}
				i += len(m[0]) - 1
			}
		case depth == 1 && c == 's' && withMain == "" && current != "" && !isJavaIdent(src[i-1]):
			if javaMainRE.MatchString(src[i:]) {
				withMain = current
			}
		}
	}
	file = public
	if file == "" {
		file = withMain
	}
	if file == "" || !javaNameRE.MatchString(file) {
		file = "Main"
	}
	if withMain == "" {
		withMain = file
	}
	if pkg != "" {
		withMain = pkg + "." + withMain
	}
	return file, withMain
}

func isJavaIdent(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// javaCode is the code with comments, string and character literals (text
// blocks too) replaced by spaces, so that only declarations are left.
func javaCode(code string) string {
	b := []byte(code)
	blank := func(from, to int) {
		for k := from; k < to && k < len(b); k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
	}
	for i := 0; i < len(b); i++ {
		switch {
		case strings.HasPrefix(code[i:], "//"):
			end := strings.IndexByte(code[i:], '\n')
			if end < 0 {
				end = len(code) - i
			}
			blank(i, i+end)
			i += end
		case strings.HasPrefix(code[i:], "/*"):
			end := strings.Index(code[i+2:], "*/")
			if end < 0 {
				end = len(code) - i - 2
			}
			blank(i, i+end+4)
			i += end + 3
		case strings.HasPrefix(code[i:], `"""`):
			end := strings.Index(code[i+3:], `"""`)
			if end < 0 {
				end = len(code) - i - 3
			}
			blank(i, i+end+6)
			i += end + 5
		case code[i] == '"' || code[i] == '\'':
			q, j := code[i], i+1
			for j < len(code) && code[j] != q && code[j] != '\n' {
				if code[j] == '\\' {
					j++
				}
				j++
			}
			blank(i, j+1)
			i = j
		}
	}
	return string(b)
}
