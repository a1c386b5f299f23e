package jetstream

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strconv"
)

// msgID is the JetStream message id of an event: JetStream suppresses a second message
// with the same id within the stream's duplicates window, which is how a repeated
// (source, id) is recognised.
//
// Two different pairs never get the same id. Short pairs of printable ASCII without spaces
// (nearly all real ones) are spelled out as "k:" source " " id; as neither part holds a
// space, the space splits them unambiguously. Any other pair becomes "h:" and the
// SHA-256 of the length-prefixed source followed by the id, so the header stays short
// and clean; the prefixes keep the two forms apart.
func msgID(source, id string) string {
	if len(source)+len(id) <= 200 && plain(source) && plain(id) {
		return "k:" + source + " " + id
	}
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(source)))])
	h.Write([]byte(source))
	h.Write([]byte(id))
	return "h:" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// plain reports whether s is non-empty printable ASCII without spaces.
func plain(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// formatTS writes a time (Unix nanoseconds) as the Evtctl-Time and Evtctl-Floor headers
// carry it: in hexadecimal.
func formatTS(ts int64) string { return strconv.FormatInt(ts, 16) }

// parseTS reads the Evtctl-Time or Evtctl-Floor header; 0 when absent or malformed.
func parseTS(v string) int64 {
	if v == "" {
		return 0
	}
	f, err := strconv.ParseInt(v, 16, 64)
	if err != nil || f < 0 {
		return 0
	}
	return f
}
