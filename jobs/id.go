package jobs

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"sync"
	"time"
)

const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// last is the time and random part of the last id made, so that ids this
// process makes within one millisecond still sort in the order it made
// them.
var last struct {
	sync.Mutex
	ms   uint64
	rand [10]byte
}

// NewID returns a new id with the given prefix ("job", "ten", "key"): the
// prefix, an underscore and 26 base32 characters holding a millisecond
// timestamp and 80 random bits. Ids sort by creation time, which makes them
// usable as pagination cursors: across processes to the millisecond, and
// within one exactly (an id made in the millisecond of the last one takes
// its random part plus one).
func NewID(prefix string) string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	last.Lock()
	if ms <= last.ms {
		ms = last.ms
		for i := len(last.rand) - 1; i >= 0; i-- { // +1, carrying
			last.rand[i]++
			if last.rand[i] != 0 {
				break
			}
		}
	} else {
		last.ms = ms
		_, _ = rand.Read(last.rand[:])
	}
	binary.BigEndian.PutUint64(b[:8], ms<<16)
	copy(b[6:], last.rand[:])
	last.Unlock()
	return IDOf(prefix, b)
}

// IDOf writes 128 bits as an id with the prefix, as NewID does.
func IDOf(prefix string, b [16]byte) string {
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

// IDBits are the 128 bits of an id with the prefix (IDOf); false for a
// string no id can be.
func IDBits(prefix, id string) ([16]byte, bool) {
	var b [16]byte
	if !ValidID(prefix, id) {
		return b, false
	}
	digits := id[len(prefix)+1:]
	if strings.IndexByte(crockford, digits[0]) > 7 {
		return b, false // more than 128 bits
	}
	var hi, lo uint64
	for i := range len(digits) {
		v := uint64(strings.IndexByte(crockford, digits[i]))
		hi = hi<<5 | lo>>59
		lo = lo<<5 | v
	}
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return b, true
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
