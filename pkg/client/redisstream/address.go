package redisstream

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Address is where a stream is: redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]/STREAM, or
// rediss:// for TLS. PORT defaults to 6379, DB to 0. STREAM is the key, percent-encoded
// where it holds characters a URL path cannot; a key of digits alone, or that starts with
// digits and a slash, needs the DB before it (redis://h/0/42), else it would read as one.
type Address struct {
	TLS      bool
	User     string
	Password string // never in String
	Host     string // host:port
	DB       int
	Stream   string
}

// ErrAddress is wrapped by every error ParseAddress returns.
var ErrAddress = errors.New("invalid Redis stream address")

// ParseAddress reads a stream's address. Its errors never repeat a password.
func ParseAddress(s string) (Address, error) {
	bad := func(format string, args ...any) (Address, error) {
		return Address{}, fmt.Errorf("%w %s: %s (want redis://[USER:PASSWORD@]HOST:PORT[/DB]/STREAM)", ErrAddress, redactText(s), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad("%v", err)
	}
	var a Address
	switch strings.ToLower(u.Scheme) {
	case "redis":
	case "rediss":
		a.TLS = true
	default:
		return bad("the scheme is not redis or rediss")
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("no host")
	}
	if u.RawQuery != "" || u.ForceQuery {
		return bad("a query (?%s) is not taken: TLS is rediss://, its CA file and --insecure are node settings", u.RawQuery)
	}
	if u.Fragment != "" {
		return bad("a fragment (#…) is not taken")
	}
	if u.User != nil {
		a.User = u.User.Username()
		a.Password, _ = u.User.Password()
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return bad("no host")
	}
	if port == "" {
		port = "6379"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return bad("port %q is not a port number", port)
	}
	a.Host = net.JoinHostPort(host, port)
	path := strings.TrimPrefix(u.EscapedPath(), "/")
	if path == "" {
		return bad("no stream: the address ends with the stream's key, as in redis://localhost:6379/0/orders")
	}
	if allDigits(path) {
		return bad("it names database %s but no stream: the address ends with the stream's key, as in redis://localhost:6379/%s/orders (a key of digits goes after the database)", path, path)
	}
	if db, rest, ok := strings.Cut(path, "/"); ok && db != "" && allDigits(db) {
		n, err := strconv.Atoi(db)
		if err != nil || n > 1<<20 {
			return bad("database %q is not a database number", db)
		}
		a.DB, path = n, rest
	}
	stream, err := url.PathUnescape(path)
	if err != nil {
		return bad("the stream's key %q is not percent-encoded properly", path)
	}
	if stream == "" {
		return bad("no stream: the address ends with the stream's key, as in redis://localhost:6379/0/orders")
	}
	a.Stream = stream
	return a, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// String is the address with the database always given and without the password: what
// evtctl names the stream by in messages and checkpoints.
func (a Address) String() string {
	var b strings.Builder
	if a.TLS {
		b.WriteString("rediss://")
	} else {
		b.WriteString("redis://")
	}
	if a.User != "" {
		b.WriteString(url.User(a.User).String())
		b.WriteByte('@')
	}
	b.WriteString(a.Host)
	b.WriteByte('/')
	b.WriteString(strconv.Itoa(a.DB))
	b.WriteByte('/')
	b.WriteString(escapeKey(a.Stream))
	return b.String()
}

// escapeKey percent-encodes a key for the last part of an address: what a path segment
// cannot hold, and "/" (which the address would read as a separator only before the key,
// but is encoded anyway so that every key reads back the same).
func escapeKey(k string) string {
	return strings.ReplaceAll(url.PathEscape(k), "/", "%2F")
}

// redactText is an address for a message: its password, if any, replaced.
func redactText(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		// Not even a URL: it may still hold a password after the scheme; say nothing of it.
		if i := strings.Index(s, "@"); i >= 0 {
			if j := strings.Index(s, "://"); j >= 0 && j < i {
				return strconv.Quote(s[:j+3] + "…@" + s[i+1:])
			}
		}
		return strconv.Quote(s)
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return strconv.Quote(u.String())
}
