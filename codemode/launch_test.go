package codemode

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestLineCap(t *testing.T) {
	t.Parallel()
	ok := strings.Repeat("x", 10) + "\n" + strings.Repeat("y", 10) + "\n"
	if b, err := io.ReadAll(&lineCap{r: strings.NewReader(ok), max: 10}); err != nil || string(b) != ok {
		t.Fatalf("lines within the cap: %q %v", b, err)
	}
	_, err := io.ReadAll(&lineCap{r: strings.NewReader(strings.Repeat("z", 11) + "\n"), max: 10})
	if !errors.Is(err, errResponseTooLarge) {
		t.Fatalf("a line past the cap: %v", err)
	}
}

func TestForbidden(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"LD_PRELOAD", "ld_preload", "NODE_OPTIONS", "PYTHONSTARTUP", "PATH", "BASH_ENV",
		"BASH_FUNC_ls%%", "HTTPS_PROXY", "no_proxy", "GANTRY_SECRET_KEY", "JAVA_TOOL_OPTIONS", "GOFLAGS", "PERL5OPT"} {
		if !Forbidden(n) {
			t.Errorf("%s is not forbidden", n)
		}
	}
	for _, n := range []string{"GITHUB_TOKEN", "GOOGLE_API_KEY", "OPENAI_API_KEY", "SLACK_BOT_TOKEN", "DATABASE_URL"} {
		if Forbidden(n) {
			t.Errorf("%s is forbidden", n)
		}
	}
}
