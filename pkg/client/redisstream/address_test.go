package redisstream

import (
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Address
		node string
	}{
		{"redis://localhost:6379/0/orders", Address{Host: "localhost:6379", Stream: "orders"}, "redis://localhost:6379/0/orders"},
		{"redis://localhost/orders", Address{Host: "localhost:6379", Stream: "orders"}, "redis://localhost:6379/0/orders"},
		{"redis://127.0.0.1:7000/3/dev-openedx-learning", Address{Host: "127.0.0.1:7000", DB: 3, Stream: "dev-openedx-learning"}, "redis://127.0.0.1:7000/3/dev-openedx-learning"},
		{"rediss://u:s3cret@cache.example.com:6380/1/s", Address{TLS: true, User: "u", Password: "s3cret", Host: "cache.example.com:6380", DB: 1, Stream: "s"}, "rediss://u@cache.example.com:6380/1/s"},
		{"redis://:s3cret@h/s", Address{Password: "s3cret", Host: "h:6379", Stream: "s"}, "redis://h:6379/0/s"},
		{"REDIS://h/0/a%2Fb%20c", Address{Host: "h:6379", Stream: "a/b c"}, "redis://h:6379/0/a%2Fb%20c"},
		{"redis://h/0/a/b", Address{Host: "h:6379", Stream: "a/b"}, "redis://h:6379/0/a%2Fb"},
		{"redis://h/x/y", Address{Host: "h:6379", Stream: "x/y"}, "redis://h:6379/0/x%2Fy"},
		{"redis://h/0/42", Address{Host: "h:6379", Stream: "42"}, "redis://h:6379/0/42"},
		{"redis://[::1]:6379/2/s", Address{Host: "[::1]:6379", DB: 2, Stream: "s"}, "redis://[::1]:6379/2/s"},
	} {
		a, err := ParseAddress(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if a != c.want {
			t.Errorf("%s: got %+v, want %+v", c.in, a, c.want)
		}
		if a.String() != c.node {
			t.Errorf("%s: named %s, want %s", c.in, a.String(), c.node)
		}
		if b, err := ParseAddress(a.String()); err != nil || b.Stream != a.Stream || b.DB != a.DB || b.Host != a.Host {
			t.Errorf("%s: its name %s reads back as %+v, %v", c.in, a.String(), b, err)
		}
	}
}

func TestParseAddressRefusals(t *testing.T) {
	for _, c := range []struct{ in, msg string }{
		{"redis://localhost:6379", "no stream"},
		{"redis://localhost:6379/0/", "no stream"},
		{"redis://localhost:6379/3", "it names database 3 but no stream"},
		{"redis:///orders", "no host"},
		{"redis://h:99999/0/s", `port "99999"`},
		{"redis://h/0/s?tls=1", "a query"},
		{"redis://h/0/s#x", "a fragment"},
		{"http://h/0/s", "not redis or rediss"},
		{"redis://h/0/%zz", "invalid URL escape"},
		{"redis://u:hunter2@h:x/0/s", `invalid port`},
		{"redis://u:hunter2@h/0/s?x", "a query"},
	} {
		_, err := ParseAddress(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: got %v, want an error with %q", c.in, err, c.msg)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", c.in, err)
		}
	}
}

// FuzzParseAddress checks that an address reads without panic, that neither its name nor an
// error about it holds its password, and that its name reads back as the same stream.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"redis://localhost/0/orders", "rediss://u:pw@h:1/2/a%2Fb", "redis://:pw@h/s", "redis://u:pw@h:x/0/s", "redis://h/0/%", "redis://u:p@w@h/s"} {
		f.Add(s, "pw")
	}
	f.Fuzz(func(t *testing.T, s, secret string) {
		a, err := ParseAddress(s)
		if err != nil {
			if a.Password != "" && strings.Contains(err.Error(), a.Password) {
				t.Fatalf("error holds the password: %v", err)
			}
			return
		}
		name := a.String()
		if len(a.Password) >= 3 && strings.Contains(name, a.Password) && !strings.Contains(a.User+a.Host+escapeKey(a.Stream), a.Password) {
			t.Fatalf("%s holds the password %q", name, a.Password)
		}
		b, err := ParseAddress(name)
		if err != nil {
			t.Fatalf("%s does not read back: %v", name, err)
		}
		a.Password = ""
		if b != a {
			t.Fatalf("%s reads back as %+v, not %+v", name, b, a)
		}
	})
}
