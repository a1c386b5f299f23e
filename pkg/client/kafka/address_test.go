package kafka

import (
	"errors"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in, node string
		check    func(Config) bool
	}{
		{"kafka://b1/orders", "kafka://b1:9092/orders", nil},
		{"KAFKA://b1:9093,b2,[::1]:9094,[::1]/o.r_d-1", "kafka://b1:9093,b2:9092,[::1]:9094,[::1]:9092/o.r_d-1", nil},
		{" kafka://127.0.0.1:29092/t?security.protocol=sasl_ssl&sasl.mechanisms=scram-sha-512&sasl.username=u&sasl.password=p%26w ",
			"kafka://127.0.0.1:29092/t", func(c Config) bool {
				return c.SecurityProtocol == SASLSSL && c.SASLMechanism == MechScramSHA512 && c.SASLUsername == "u" && c.SASLPassword == "p&w"
			}},
		{"kafka://h/t?security.protocol=SSL&ssl.ca.location=/etc/ca.pem&enable.ssl.certificate.verification=false", "kafka://h:9092/t", func(c Config) bool {
			return c.SecurityProtocol == SSL && c.SSLCALocation == "/etc/ca.pem" && c.SSLVerify != nil && !*c.SSLVerify
		}},
		{"kafka://h/t?security.protocol=SSL&ssl.certificate.location=c.pem&ssl.key.location=k.pem", "kafka://h:9092/t", nil},
	} {
		cfg, err := ParseURL(c.in)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", c.in, err)
			continue
		}
		if cfg.Node() != c.node || c.check != nil && !c.check(cfg) {
			t.Errorf("ParseURL(%q) = %+v, node %s", c.in, cfg, cfg.Node())
		}
	}
}

func TestParseURLRefuses(t *testing.T) {
	for in, want := range map[string]string{
		"http://b1/t":           "not a Kafka address",
		"kafka://b1":            "names no topic",
		"kafka://b1/":           "names no topic",
		"kafka://b1,,b2/t":      "an empty broker",
		"kafka://b1:x/t":        `port "x"`,
		"kafka://b1:70000/t":    "port",
		"kafka://u:pw@b1/t":     "sasl.username and sasl.password options",
		"kafka://b1/a/b":        "not a valid topic name",
		"kafka://b1/..":         "not a valid topic name",
		"kafka://b1/t#x":        "fragment",
		"kafka://b1/t?acks=all": `unknown Kafka option "acks"`,
		"kafka://b1/t?security.protocol=SASL_SSL&sasl.username=u&sasl.password=s3cr3t":                       "needs sasl.mechanism",
		"kafka://b1/t?security.protocol=SASL_SSL&sasl.mechanism=GSSAPI&sasl.username=u&sasl.password=s3cr3t": "not supported",
		"kafka://b1/t?security.protocol=SASL_PLAINTEXT&sasl.mechanism=PLAIN&sasl.username=u":                 "SASL needs sasl.username and sasl.password",
		"kafka://b1/t?sasl.username=u&sasl.password=s3cr3t":                                                  "SASL options need security.protocol",
		"kafka://b1/t?ssl.ca.location=/x":                                                                    "TLS options need security.protocol",
		"kafka://b1/t?security.protocol=SSL&ssl.certificate.location=c":                                      "needs both",
		"kafka://b1/t?security.protocol=TLS":                                                                 "want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
		"kafka://b1/t?enable.ssl.certificate.verification=maybe":                                             "want true or false",
		"kafka://b1/t?sasl.password=s3cr3t&sasl.password=s3cr3t":                                             "given 2 times",
		"kafka://b1/t?sasl.password=s3cr3t%zz":                                                               "invalid %-escape",
		"kafka://u:s3cr3t@b1/t?sasl.password=s3cr3t&security.protocol=SSL":                                   "sasl.username",
	} {
		_, err := ParseURL(in)
		var ae *AddressError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%q) = %v, want an error saying %q", in, err, want)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("ParseURL(%q): the error shows the password: %v", in, err)
		}
	}
}

func TestConfigFromSettings(t *testing.T) {
	c := Config{Brokers: []string{"k1", "k2:9093"}, Topic: "t"}
	for _, kv := range [][2]string{{"security.protocol", "SASL_PLAINTEXT"}, {"sasl.mechanism", "PLAIN"}, {"sasl.username", "u"}, {"sasl.password", "p"}} {
		if err := c.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Node() != "kafka://k1:9092,k2:9093/t" {
		t.Errorf("node %s", c.Node())
	}
	if err := c.Set("linger.ms", "5"); err == nil {
		t.Error("an unknown option was taken")
	}
}

func TestPositionsAndCursors(t *testing.T) {
	for _, s := range []string{"", "0", "1235,988,1020", "9223372036854775807,0"} {
		p, err := ParsePosition(s)
		if err != nil || p.String() != s {
			t.Errorf("ParsePosition(%q) = %v, %v", s, p, err)
		}
	}
	for _, s := range []string{",", "1,", "01", "-1", "+1", "1 ,2", "2/3", "9223372036854775808", "x"} {
		if _, err := ParsePosition(s); err == nil {
			t.Errorf("ParsePosition(%q) passed", s)
		}
	}
	if _, err := ParsePosition(strings.Repeat("0,", MaxPartitions) + "0"); err == nil {
		t.Error("a position of too many partitions passed")
	}
	for _, s := range []string{"0/0", "2/1234", "2147483647/9223372036854775807"} {
		p, o, err := ParseCursor(s)
		if err != nil || FormatCursor(p, o) != s {
			t.Errorf("ParseCursor(%q) = %d, %d, %v", s, p, o, err)
		}
	}
	for _, s := range []string{"", "2", "2/", "/3", "02/3", "2/03", "-1/3", "2147483648/0", "2/3/4", "1,2"} {
		var ce *CursorError
		if _, _, err := ParseCursor(s); !errors.As(err, &ce) {
			t.Errorf("ParseCursor(%q) = %v", s, err)
		}
	}
}
