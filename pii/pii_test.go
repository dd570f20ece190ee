package pii

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/secret"
)

// memVault is a Vault in memory, with the store's semantics.
type memVault struct {
	mu     sync.Mutex
	now    time.Time
	byHash map[string]*memRow         // tenant \x00 hash
	byRef  map[string]map[Ref]*memRow // tenant -> ref
	last   map[string]int             // tenant \x00 kind
	calls  int
}

type memRow struct {
	ref     Ref
	sealed  []byte
	expires time.Time
}

func newMemVault() *memVault {
	return &memVault{now: time.Unix(1e9, 0), byHash: map[string]*memRow{}, byRef: map[string]map[Ref]*memRow{}, last: map[string]int{}}
}

func (v *memVault) PIIToken(_ context.Context, tenantID, kind string, valueHash, sealed []byte, ttl time.Duration) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls++
	if r, ok := v.byHash[tenantID+"\x00"+string(valueHash)]; ok {
		if r.ref.Kind != kind {
			return 0, errors.New("hash of another kind")
		}
		if exp := v.now.Add(ttl); exp.After(r.expires) {
			r.expires = exp
		}
		return r.ref.N, nil
	}
	v.last[tenantID+"\x00"+kind]++
	r := &memRow{ref: Ref{Kind: kind, N: v.last[tenantID+"\x00"+kind]}, sealed: sealed, expires: v.now.Add(ttl)}
	v.byHash[tenantID+"\x00"+string(valueHash)] = r
	if v.byRef[tenantID] == nil {
		v.byRef[tenantID] = map[Ref]*memRow{}
	}
	v.byRef[tenantID][r.ref] = r
	return r.ref.N, nil
}

func (v *memVault) PIIValues(_ context.Context, tenantID string, refs []Ref) (map[Ref][]byte, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[Ref][]byte{}
	for _, ref := range refs {
		if r, ok := v.byRef[tenantID][ref]; ok && r.expires.After(v.now) {
			out[ref] = r.sealed
		}
	}
	return out, nil
}

func (v *memVault) advance(d time.Duration) {
	v.mu.Lock()
	v.now = v.now.Add(d)
	v.mu.Unlock()
}

func testBox(t testing.TB) *secret.Box {
	t.Helper()
	key, err := secret.ParseKey(secret.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	box, err := secret.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return box
}

func TestTokenizeMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newMemVault()
	tk := New(v, testBox(t), time.Hour)

	in := "Mail Jane.Doe@Example.com or jane.doe@example.com, call +1 555 123 4567, card 4111 1111 1111 1111 (again: 4111111111111111), bob@example.org. Keep [EMAIL_9]."
	out, err := tk.Tokenize(ctx, "ten_a", in)
	if err != nil {
		t.Fatal(err)
	}
	want := "Mail [EMAIL_1] or [EMAIL_1], call [PHONE_1], card [CARD_1] (again: [CARD_1]), [EMAIL_2]. Keep [EMAIL_9]."
	if out != want {
		t.Fatalf("Tokenize\n got %q\nwant %q", out, want)
	}
	if v.calls != 4 {
		t.Errorf("vault calls = %d, want 4 (one per distinct value)", v.calls)
	}
	for _, s := range []string{"Jane", "jane", "555", "4111", "bob"} {
		if strings.Contains(out, s) {
			t.Errorf("tokenized text still holds %q", s)
		}
	}
	// Stable across calls.
	if again, _ := tk.Tokenize(ctx, "ten_a", "bob@example.org"); again != "[EMAIL_2]" {
		t.Errorf("second Tokenize = %q", again)
	}
	// Values as first seen; an unknown token stays.
	back, err := tk.Detokenize(ctx, "ten_a", out)
	if err != nil {
		t.Fatal(err)
	}
	wantBack := "Mail Jane.Doe@Example.com or Jane.Doe@Example.com, call +1 555 123 4567, card 4111 1111 1111 1111 (again: 4111 1111 1111 1111), bob@example.org. Keep [EMAIL_9]."
	if back != wantBack {
		t.Fatalf("Detokenize\n got %q\nwant %q", back, wantBack)
	}
	// Another tenant: own numbering, cannot read ten_a's tokens.
	if b, _ := tk.Tokenize(ctx, "ten_b", "x@example.net bob@example.org"); b != "[EMAIL_1] [EMAIL_2]" {
		t.Errorf("tenant b Tokenize = %q", b)
	}
	if b, _ := tk.Detokenize(ctx, "ten_b", "[PHONE_1] [CARD_1]"); b != "[PHONE_1] [CARD_1]" {
		t.Errorf("tenant b read tenant a's tokens: %q", b)
	}
	// Expired tokens stay tokens; seeing the value again revives its token.
	v.advance(2 * time.Hour)
	if b, _ := tk.Detokenize(ctx, "ten_a", "[EMAIL_2]"); b != "[EMAIL_2]" {
		t.Errorf("expired token detokenized: %q", b)
	}
	if again, _ := tk.Tokenize(ctx, "ten_a", "bob@example.org"); again != "[EMAIL_2]" {
		t.Errorf("revived token = %q", again)
	}
	if b, _ := tk.Detokenize(ctx, "ten_a", "to [EMAIL_2]"); b != "to bob@example.org" {
		t.Errorf("revived token detokenized: %q", b)
	}
	// Nothing to do: no vault calls, text unchanged (also invalid UTF-8).
	calls := v.calls
	for _, s := range []string{"", "plain text", "\xff\xfe 2024-01-15", "[NOPE_1] [EMAIL_0] [EMAIL_x]"} {
		if got, err := tk.Tokenize(ctx, "ten_a", s); got != s || err != nil {
			t.Errorf("Tokenize(%q) = %q, %v", s, got, err)
		}
		if got, err := tk.Detokenize(ctx, "ten_a", s); got != s || err != nil {
			t.Errorf("Detokenize(%q) = %q, %v", s, got, err)
		}
	}
	if v.calls != calls {
		t.Errorf("vault called for text without data")
	}
}

func TestTokenizeNoKey(t *testing.T) {
	t.Parallel()
	tk := New(newMemVault(), nil, 0)
	if _, err := tk.Tokenize(context.Background(), "t", "a@example.com"); !errors.Is(err, secret.ErrNoKey) {
		t.Fatalf("err = %v", err)
	}
	if s, err := tk.Tokenize(context.Background(), "t", "nothing here"); err != nil || s != "nothing here" {
		t.Fatalf("%q %v", s, err)
	}
}

func TestDetokenizeWrongKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newMemVault()
	out, err := New(v, testBox(t), time.Hour).Tokenize(ctx, "t", "a@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(v, testBox(t), time.Hour).Detokenize(ctx, "t", out); err == nil {
		t.Fatal("detokenized with another key")
	}
}

func TestTokenizeLarge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tk := New(newMemVault(), testBox(t), time.Hour)
	text := bigText(1 << 20)
	start := time.Now()
	out, err := tk.Tokenize(ctx, "t", text)
	if err != nil {
		t.Fatal(err)
	}
	mid := time.Now()
	back, err := tk.Detokenize(ctx, "t", out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("1 MiB: tokenize %s, detokenize %s", mid.Sub(start), time.Since(mid))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("round trip of 1 MiB took %s", took)
	}
	if want := expectedRoundTrip(text); back != want {
		t.Fatal("round trip of 1 MiB changed the text")
	}
}

// expectedRoundTrip is text with every match replaced by the first-seen
// text of its normalised value: what Detokenize(Tokenize(text)) gives
// with a fresh vault.
func expectedRoundTrip(text string) string {
	first := map[string]string{}
	var b strings.Builder
	prev := 0
	for _, m := range Find(text) {
		key := m.Kind + "\x00" + Normalize(m.Kind, m.Value)
		v, ok := first[key]
		if !ok {
			first[key] = m.Value
			v = m.Value
		}
		b.WriteString(text[prev:m.Start])
		b.WriteString(v)
		prev = m.End
	}
	b.WriteString(text[prev:])
	return b.String()
}

// FuzzTokenizeRoundTrip: Detokenize(Tokenize(x)) == x for any x without a
// token in it already (up to values written two ways, which come back as
// first seen), Tokenize never fails or leaves detected data in place, and
// Find's matches are ordered, disjoint and in bounds.
func FuzzTokenizeRoundTrip(f *testing.F) {
	for _, s := range []string{
		"", "hello", "john@example.com", "call +1 (555) 123-4567 or 555-123-4567",
		"4111 1111 1111 1111 and 4111111111111111", "DE89 3704 0044 0532 0130 00 / GB29NWBK60161331926819",
		"ssn 078-05-1120", "\xff\xfe@\x00x@y.zz", "[EMAIL_1", "EMAIL_1] a@b.co", "a@b.co[PHONE_",
		"2024-01-15T10:30:00Z 1,299.00 ORD-2024-000123 1.2.3.4", "+44 (0)20 7946 0958, 01 23 45 67 89",
	} {
		f.Add(s)
	}
	box := testBox(f)
	f.Fuzz(func(t *testing.T, x string) {
		ms := Find(x)
		end := 0
		for _, m := range ms {
			if m.Start < end || m.End <= m.Start || m.End > len(x) || x[m.Start:m.End] != m.Value {
				t.Fatalf("bad match %+v (previous ended at %d) in %q", m, end, x)
			}
			end = m.End
		}
		if HasTokens(x) {
			return
		}
		ctx := context.Background()
		tk := New(newMemVault(), box, time.Hour)
		tok, err := tk.Tokenize(ctx, "t", x)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) > 0 && tok == x {
			t.Fatalf("Tokenize(%q) changed nothing though Find found %v", x, ms)
		}
		back, err := tk.Detokenize(ctx, "t", tok)
		if err != nil {
			t.Fatal(err)
		}
		if want := expectedRoundTrip(x); back != want {
			t.Fatalf("round trip of %q\n tokenized %q\n      back %q\n      want %q", x, tok, back, want)
		}
		// Other tenants see only tokens.
		if other, _ := tk.Detokenize(ctx, "u", tok); other != tok {
			t.Fatalf("tenant u detokenized %q to %q", tok, other)
		}
	})
}

func ExampleTokenizer() {
	ctx := context.Background()
	key, _ := secret.ParseKey(strings.Repeat("ab", 32))
	box, _ := secret.New(key)
	tk := New(newMemVault(), box, time.Hour) // use the store as the Vault

	out, _ := tk.Tokenize(ctx, "ten_1", "Contact: ada@example.com, +44 20 7946 0958")
	fmt.Println(out)
	back, _ := tk.Detokenize(ctx, "ten_1", "send_mail(to=[EMAIL_1])")
	fmt.Println(back)
	// Output:
	// Contact: [EMAIL_1], [PHONE_1]
	// send_mail(to=ada@example.com)
}

// A token's text is rendered (Ref.String, Token) and parsed (Detokenize's
// pattern) here, in one package: every kind and number round-trips.
func TestRefTextRoundTrips(t *testing.T) {
	t.Parallel()
	for _, kind := range Kinds {
		for _, n := range []int{1, 42, 1<<31 - 1} {
			r := Ref{Kind: kind, N: n}
			text := r.String()
			if text != "["+kind+"_"+strconv.Itoa(n)+"]" || text != Token(kind, n) {
				t.Fatalf("%+v renders as %q", r, text)
			}
			m := tokenRE.FindStringSubmatch("before " + text + " after")
			if m == nil || m[0] != text || m[1] != kind || m[2] != strconv.Itoa(n) {
				t.Fatalf("%q parses as %q", text, m)
			}
		}
	}
}
