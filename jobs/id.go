package jobs

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"time"
)

const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// NewID returns a new id with the given prefix ("job", "ten", "key"): the
// prefix, an underscore and 26 base32 characters holding a millisecond
// timestamp and 80 random bits. Ids sort by creation time, which makes them
// usable as pagination cursors.
func NewID(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	var sb strings.Builder
	sb.Grow(len(prefix) + 27)
	sb.WriteString(prefix)
	sb.WriteByte('_')
	// 128 bits as 26 base32 digits (the first holds 3 bits).
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	for i := 25; i >= 0; i-- {
		shift := uint(i * 5)
		var v uint64
		switch {
		case shift >= 64:
			v = hi >> (shift - 64)
		case shift > 59:
			v = lo>>shift | hi<<(64-shift)
		default:
			v = lo >> shift
		}
		sb.WriteByte(crockford[v&31])
	}
	return sb.String()
}

// ValidID reports whether s looks like an id NewID made with this prefix.
// It lets handlers answer 404 for garbage without a database round trip.
func ValidID(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix+"_")
	if !ok || len(rest) != 26 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(crockford, rest[i]) < 0 {
			return false
		}
	}
	return true
}
