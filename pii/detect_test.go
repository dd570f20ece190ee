package pii

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestFindTruePositives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		want []Match // Start and End are checked against Value's position
	}{
		// E-mail addresses.
		{"mail john.doe@example.com now", []Match{{Kind: Email, Value: "john.doe@example.com"}}},
		{"<JANE+tag@Mail.Example.CO.UK>", []Match{{Kind: Email, Value: "JANE+tag@Mail.Example.CO.UK"}}},
		{`{"email":"a_b-c%d@sub-domain.example.org"}`, []Match{{Kind: Email, Value: "a_b-c%d@sub-domain.example.org"}}},
		{"end of sentence: x@y.io.", []Match{{Kind: Email, Value: "x@y.io"}}},
		{"mailto:bob@example.net?subject=hi", []Match{{Kind: Email, Value: "bob@example.net"}}},
		{"two: a@b.cd,c@d.ef", []Match{{Kind: Email, Value: "a@b.cd"}, {Kind: Email, Value: "c@d.ef"}}},
		{"..dots.@x.com .lead@x.com", []Match{{Kind: Email, Value: "lead@x.com"}}},

		// Phone numbers.
		{"call +1 (555) 123-4567 today", []Match{{Kind: Phone, Value: "+1 (555) 123-4567"}}},
		{"+1-555-123-4567", []Match{{Kind: Phone, Value: "+1-555-123-4567"}}},
		{"+1.555.123.4567", []Match{{Kind: Phone, Value: "+1.555.123.4567"}}},
		{"+15551234567", []Match{{Kind: Phone, Value: "+15551234567"}}},
		{"tel: +44 20 7946 0958", []Match{{Kind: Phone, Value: "+44 20 7946 0958"}}},
		{"+44 (0)20 7946 0958", []Match{{Kind: Phone, Value: "+44 (0)20 7946 0958"}}},
		{"+49 30 12345678", []Match{{Kind: Phone, Value: "+49 30 12345678"}}},
		{"+4915112345678", []Match{{Kind: Phone, Value: "+4915112345678"}}},
		{"+33 1 23 45 67 89", []Match{{Kind: Phone, Value: "+33 1 23 45 67 89"}}},
		{"+81 3-1234-5678", []Match{{Kind: Phone, Value: "+81 3-1234-5678"}}},
		{"+7 495 123-45-67", []Match{{Kind: Phone, Value: "+7 495 123-45-67"}}},
		{"+1 555 123 4567 2024", []Match{{Kind: Phone, Value: "+1 555 123 4567"}}},
		{"555-123-4567", []Match{{Kind: Phone, Value: "555-123-4567"}}},
		{"555.123.4567", []Match{{Kind: Phone, Value: "555.123.4567"}}},
		{"(555) 123-4567", []Match{{Kind: Phone, Value: "(555) 123-4567"}}},
		{"(555)123-4567", []Match{{Kind: Phone, Value: "(555)123-4567"}}},
		{"(555) 123 4567", []Match{{Kind: Phone, Value: "(555) 123 4567"}}},
		{"tel:+15551234567", []Match{{Kind: Phone, Value: "+15551234567"}}},
		{"1-800-555-1234", []Match{{Kind: Phone, Value: "1-800-555-1234"}}},
		{"020 7946 0958", []Match{{Kind: Phone, Value: "020 7946 0958"}}},
		{"(020) 7946 0958", []Match{{Kind: Phone, Value: "(020) 7946 0958"}}},
		{"07700 900123", []Match{{Kind: Phone, Value: "07700 900123"}}},
		{"030/12345678", []Match{{Kind: Phone, Value: "030/12345678"}}},
		{"01 23 45 67 89", []Match{{Kind: Phone, Value: "01 23 45 67 89"}}},
		{"01.23.45.67.89", []Match{{Kind: Phone, Value: "01.23.45.67.89"}}},
		{"06-12345678", []Match{{Kind: Phone, Value: "06-12345678"}}},
		{"phone=555-123-4567&x=1", []Match{{Kind: Phone, Value: "555-123-4567"}}},

		// Cards (test numbers of the networks).
		{"card 4111 1111 1111 1111 exp 12/25", []Match{{Kind: Card, Value: "4111 1111 1111 1111"}}},
		{"4111111111111111", []Match{{Kind: Card, Value: "4111111111111111"}}},
		{"4111-1111-1111-1111", []Match{{Kind: Card, Value: "4111-1111-1111-1111"}}},
		{"4111 1111 1111 1111 123", []Match{{Kind: Card, Value: "4111 1111 1111 1111"}}},
		{"5555 5555 5555 4444", []Match{{Kind: Card, Value: "5555 5555 5555 4444"}}},
		{"amex 3782 822463 10005", []Match{{Kind: Card, Value: "3782 822463 10005"}}},
		{"378282246310005", []Match{{Kind: Card, Value: "378282246310005"}}},
		{"6011111111111117", []Match{{Kind: Card, Value: "6011111111111117"}}},
		{"4222222222222", []Match{{Kind: Card, Value: "4222222222222"}}},
		{`"pan":"5105105105105100"`, []Match{{Kind: Card, Value: "5105105105105100"}}},
		{"id,card\n17,4111111111111111\n", []Match{{Kind: Card, Value: "4111111111111111"}}},

		// IBANs.
		{"DE89 3704 0044 0532 0130 00", []Match{{Kind: IBAN, Value: "DE89 3704 0044 0532 0130 00"}}},
		{"iban: DE89370400440532013000.", []Match{{Kind: IBAN, Value: "DE89370400440532013000"}}},
		{"GB29 NWBK 6016 1331 9268 19", []Match{{Kind: IBAN, Value: "GB29 NWBK 6016 1331 9268 19"}}},
		{"GB29NWBK60161331926819", []Match{{Kind: IBAN, Value: "GB29NWBK60161331926819"}}},
		{"FR14 2004 1010 0505 0001 3M02 606", []Match{{Kind: IBAN, Value: "FR14 2004 1010 0505 0001 3M02 606"}}},
		{"NL91ABNA0417164300", []Match{{Kind: IBAN, Value: "NL91ABNA0417164300"}}},
		{"BE68 5390 0754 7034 to pay", []Match{{Kind: IBAN, Value: "BE68 5390 0754 7034"}}},
		{"NO9386011117947", []Match{{Kind: IBAN, Value: "NO9386011117947"}}},
		{"de89370400440532013000", []Match{{Kind: IBAN, Value: "de89370400440532013000"}}},

		// SSNs.
		{"ssn 078-05-1120", []Match{{Kind: SSN, Value: "078-05-1120"}}},
		{"SSN: 123-45-6789.", []Match{{Kind: SSN, Value: "123-45-6789"}}},

		// Several kinds together.
		{"Jane <jane@example.com>, +1 555 123 4567, card 4111111111111111, DE89370400440532013000, 078-05-1120",
			[]Match{
				{Kind: Email, Value: "jane@example.com"},
				{Kind: Phone, Value: "+1 555 123 4567"},
				{Kind: Card, Value: "4111111111111111"},
				{Kind: IBAN, Value: "DE89370400440532013000"},
				{Kind: SSN, Value: "078-05-1120"},
			}},
		// JSON-escaped text.
		{`"Jane \u003cjane@example.com\u003e\nphone: 555-123-4567\tcard\n4111111111111111\r\nDE89370400440532013000"`,
			[]Match{
				{Kind: Email, Value: "jane@example.com"},
				{Kind: Phone, Value: "555-123-4567"},
				{Kind: Card, Value: "4111111111111111"},
				{Kind: IBAN, Value: "DE89370400440532013000"},
			}},
		// Non-ASCII and invalid UTF-8 around data.
		{"Tél : +33 1 23 45 67 89 — é\xff\xfeam@x.fr\xff", []Match{{Kind: Phone, Value: "+33 1 23 45 67 89"}, {Kind: Email, Value: "am@x.fr"}}},
	}
	for _, tt := range tests {
		got := Find(tt.text)
		var want []Match
		from := 0
		for _, m := range tt.want {
			i := strings.Index(tt.text[from:], m.Value)
			if i < 0 {
				t.Fatalf("bad test: %q not in %q", m.Value, tt.text)
			}
			m.Start, m.End = from+i, from+i+len(m.Value)
			from = m.End
			want = append(want, m)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Find(%q)\n got %v\nwant %v", tt.text, got, want)
		}
	}
}

// Ordinary text with numbers that are not personal data.
var notPII = []string{
	"in 2024", "1999-2024", "the year 1987 and 2001",
	"price 1,299.00", "$1299.00", "€ 1.299,00", "total: 12,345,678.90 USD", "-1234567.89", "+1234567.89",
	"order ORD-2024-000123", "invoice INV/2024/0001234", "ticket #123456789", "id=987654321",
	"user_id 1234567890", "PO-555-123-4567", "SKU 555-123-4567-B",
	"2024-01-15", "2024-01-15T10:30:00Z", "2024-01-15 10:30:00.123456", "15.01.2024", "01/15/2024", "01.02.2024 12:30",
	"+2024-01-15", "10:30:45", "12:30:45.678",
	"version 1.2.3.4", "v10.0.19041.1234", "go1.26.8", "1.2.3-rc.4+build.5",
	"123e4567-e89b-12d3-a456-426614174000", "12345678-1234-1234-1234-123456789012", "550e8400-e29b-41d4-a716-446655440000",
	"4111111111111112", "1234567812345678", "4111 1111 1111 1112", "0000000000000000", "9999999999999999",
	"1700000000000", "1700000000123", "1712345678901234567",
	"call me at 5", "call 911", "room 555", "555-1234", "123-4567", "x 100 200 3000", "sizes 256 512 1024",
	"555 123 4567", "(555)-123-4567-1", "555-123.4567", "1 555 123 4567",
	"192.168.100.200", "10.0.0.1", "ip 2001:db8::1", "::ffff:192.0.2.128",
	"000-12-3456", "666-12-3456", "900-12-3456", "123-00-4567", "123-45-0000", "1123-45-6789", "123-45-67890",
	"DE89 3704 0044 0532 0130 01", "DE8937040044053201300", "XX89370400440532013000", "AB12 CDEF GHIJ KLMN",
	"00000010  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00", "01 02 03 04 05 06 07 08 09 0a",
	"hexdump: 0f 1e 2d 3c 4b 5a 69 78", "sha 3a7bd3e2360a3d29eea436fcfb7e44c735d117c4",
	"matrix 1 2 3 4 5 6 7 8 9 10", "1 2 3 4 5 6 7 8", "3.14159265358979", "2.718281828459045",
	"ISBN 978-3-16-148410-0", "+49", "+1", "C++ 17", "a+b=12345678", "e.g. 1e10 or 6.02e23",
	"user@localhost", "@handle", "foo@bar", "a@b.c", "x@-bad.com", "me@example.123",
	"icon@2x.png", "logo@3x.WEBP", "lodash@4.17.21", "image@sha256:9f86d081884c7d65", "@types/node", "@app.route('/')",
	"git diff 4b825dc642cb6eb9a060e54bf8d69288fbee4904", "port 8080, pid 12345, uid 1000",
	"Boston, MA 02110-1301 USA", "e[1]=e[1]+3545052371+(e[0]>>>0)", "C++20 17.12.2 coroutine", "Tue Nov 10 23:00:00 +0000 2009",
	"7f3a r--p 00000000 fd:01 17432624   /usr/lib/x", `Scan("04:05:06.7891234")`, "00:00:01.0000001", "x = 06.7891234",
	"00000130  4e 3c 7e 05 33 60 94 27  0f f6 9c 5d", "00000000  05 36 32 93 77 a1 67 52", "ff 50 4b 03 04 14 00 00\n0000060",
	"fingerprint: 5911716720268894962,", "newuint64(35184269148160)", "2880761508848", "3762322556277578591",
	"52472 2104 9565 749555 9568641", "(vim) R 5392 7446 5392 34835 7446", "hello 2323 232323 323 2323",
	"Lat 52.520008, Lon 13.404954", `"\u20ac 1299.00\n2024-01-15\t10:30"`, `\x4111111111111111`, "(0)", "(123)", "0 1234 5678", "00 44 20 7946 0958",
}

func TestFindFalsePositives(t *testing.T) {
	t.Parallel()
	for _, s := range notPII {
		if got := Find(s); len(got) != 0 {
			t.Errorf("Find(%q) = %v, want nothing", s, got)
		}
		// Also embedded in prose.
		if got := Find("see " + s + " here"); len(got) != 0 {
			t.Errorf("Find(see %q here) = %v, want nothing", s, got)
		}
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ kind, a, b string }{
		{Card, "4111 1111 1111 1111", "4111-1111-1111-1111"},
		{Card, "4111 1111 1111 1111", "4111111111111111"},
		{Email, "John.Doe@Example.com", "john.doe@example.COM"},
		{Phone, "+1 (555) 123-4567", "+1.555.123.4567"},
		{Phone, "+44 (0)20 7946 0958", "+44 20 7946 0958"},
		{IBAN, "DE89 3704 0044 0532 0130 00", "de89370400440532013000"},
		{SSN, "078-05-1120", "078051120"},
	} {
		if a, b := Normalize(tt.kind, tt.a), Normalize(tt.kind, tt.b); a != b {
			t.Errorf("Normalize(%s): %q -> %q but %q -> %q", tt.kind, tt.a, a, tt.b, b)
		}
	}
}

// bigText is n bytes of log-like text, dense with numbers, a few of them
// personal data.
func bigText(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	lines := []func() string{
		func() string {
			return fmt.Sprintf("2024-01-%02dT10:%02d:%02d.%06dZ INFO request id=%d took %d.%03dms status=200",
				r.IntN(28)+1, r.IntN(60), r.IntN(60), r.IntN(1e6), r.Int64(), r.IntN(1000), r.IntN(1000))
		},
		func() string {
			return fmt.Sprintf("order ORD-2024-%06d total %d,%03d.%02d EUR for user%d@example.com", r.IntN(1e6), r.IntN(9)+1, r.IntN(1000), r.IntN(100), r.IntN(1000))
		},
		func() string { return "The quick brown fox jumps over the lazy dog; nothing personal here at all." },
		func() string {
			return fmt.Sprintf("%d,%d,%d,%d.%d,+1 555 %03d %04d,4111111111111111", r.IntN(1e9), r.IntN(100), r.Int64(), r.IntN(100), r.IntN(100), r.IntN(1000), r.IntN(10000))
		},
		func() string { return strings.Repeat("0123456789 ", 6) },
		func() string {
			return "\xff\xfe\x00 invalid utf-8 and ünïcödé text 123-45-6789 DE89 3704 0044 0532 0130 00"
		},
	}
	for b.Len() < n {
		b.WriteString(lines[r.IntN(len(lines))]())
		b.WriteByte('\n')
	}
	return b.String()[:n]
}

func TestFindLargeInput(t *testing.T) {
	t.Parallel()
	text := bigText(1 << 20)
	start := time.Now()
	ms := Find(text)
	took := time.Since(start)
	t.Logf("Find on 1 MiB: %d matches in %s", len(ms), took)
	if took > 2*time.Second { // generous for -race and slow machines; typically ~100ms
		t.Errorf("Find on 1 MiB took %s", took)
	}
	end := 0
	for _, m := range ms {
		if m.Start < end || m.End <= m.Start || text[m.Start:m.End] != m.Value {
			t.Fatalf("bad match %+v after %d", m, end)
		}
		end = m.End
	}
	// Worst cases for the scanners: one long run of digits, of groups,
	// of '@'s, of local-part bytes.
	for _, s := range []string{
		strings.Repeat("1", 1<<20), strings.Repeat("1-", 1<<19), strings.Repeat("12 ", 1<<18),
		strings.Repeat("@", 1<<20), strings.Repeat("a", 1<<20) + "@x.com", strings.Repeat("a.", 1<<19) + "@",
		strings.Repeat("+1 ", 1<<18), strings.Repeat("AB12 ", 1<<18), strings.Repeat("DE12 ", 1<<18), strings.Repeat("a@b.", 1<<18),
		strings.Repeat("012 ", 1<<18), strings.Repeat("(555) ", 1<<17), strings.Repeat("4111 ", 1<<18), strings.Repeat("123-45-", 1<<17),
	} {
		start := time.Now()
		Find(s)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("Find on %q... took %s", s[:8], took)
		}
	}
}

func BenchmarkFind(b *testing.B) {
	text := bigText(1 << 20)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Find(text)
	}
}

func BenchmarkFindProse(b *testing.B) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog in 2024, contact jane@example.com. ", 1<<20/80)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Find(text)
	}
}
