package compat

import (
	"encoding/base64"
	"strings"
)

// LaxBase64 decodes base64 as Python's base64.b64decode and Ruby's
// Base64.decode64 do: characters outside the alphabet (line breaks, spaces)
// are skipped, and missing padding is no error.
func LaxBase64(s string) ([]byte, error) {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '+', r == '/':
			return r
		}
		return -1
	}, s)
	if len(clean)%4 == 1 {
		clean = clean[:len(clean)-1] // a lone sextet holds no byte
	}
	return base64.RawStdEncoding.DecodeString(clean)
}

// Encode64 encodes as Ruby's Base64.encode64 does (Judge0's answers): lines
// of 60 characters, each ending in a newline.
func Encode64(b []byte) string {
	s := base64.StdEncoding.EncodeToString(b)
	var out strings.Builder
	out.Grow(len(s) + len(s)/60 + 1)
	for len(s) > 60 {
		out.WriteString(s[:60])
		out.WriteByte('\n')
		s = s[60:]
	}
	if s != "" {
		out.WriteString(s)
		out.WriteByte('\n')
	}
	return out.String()
}
