package pii
import ("testing";"strings";"time")
func TestZZ(t *testing.T){
	for _, s := range []string{
		strings.Repeat("1", 1<<20), strings.Repeat("1-", 1<<19), strings.Repeat("12 ", 1<<18),
		strings.Repeat("@", 1<<20), strings.Repeat("a", 1<<20) + "@x.com", strings.Repeat("a.", 1<<19) + "@",
		strings.Repeat("+1 ", 1<<18), strings.Repeat("AB12 ", 1<<18), strings.Repeat("a@b.", 1<<18),
		strings.Repeat("DE12 ", 1<<18), strings.Repeat("012 ", 1<<18), strings.Repeat("(555) ", 1<<17), strings.Repeat("4111 ", 1<<18), strings.Repeat("123-45-", 1<<17),
	} {
		start := time.Now()
		Find(s)
		t.Logf("%q %s", s[:8], time.Since(start))
	}
}
