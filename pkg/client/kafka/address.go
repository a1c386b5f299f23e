// Package kafka is the client's source of Kafka topics (kafka:// addresses): it reads a
// topic of CloudEvents as pages of items with cursors, positions and gaps, and produces
// CloudEvents to a topic in the Kafka binary mode.
package kafka

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/evtctl/evtctl/internal/tlsfiles"
)

// Scheme is the URL scheme of a Kafka address: kafka://BROKER[,BROKER…]/TOPIC.
const Scheme = "kafka"

// DefaultPort is the port of a broker given without one.
const DefaultPort = "9092"

// Config is a topic and how to reach its cluster. Options carry the names the Kafka tools
// give them (librdkafka's, as kcat -X takes them), in a kafka:// URL's query, in a
// context's settings (the yaml keys) and through Set.
type Config struct {
	Brokers []string `yaml:"brokers,omitempty"` // host:port of the bootstrap brokers
	Topic   string   `yaml:"topic,omitempty"`

	// SecurityProtocol is security.protocol: PLAINTEXT (the default), SSL, SASL_PLAINTEXT
	// or SASL_SSL.
	SecurityProtocol string `yaml:"security.protocol,omitempty"`
	// SASLMechanism is sasl.mechanism (or sasl.mechanisms): PLAIN, SCRAM-SHA-256 or
	// SCRAM-SHA-512; required with SASL.
	SASLMechanism string `yaml:"sasl.mechanism,omitempty"`
	SASLUsername  string `yaml:"sasl.username,omitempty"`
	SASLPassword  string `yaml:"sasl.password,omitempty"` // never shown: see Node
	// SSLCALocation is ssl.ca.location: a PEM bundle of CAs trusted beside the system's.
	SSLCALocation string `yaml:"ssl.ca.location,omitempty"`
	// SSLCertificateLocation and SSLKeyLocation (ssl.certificate.location,
	// ssl.key.location) are a client certificate and its key, in PEM.
	SSLCertificateLocation string `yaml:"ssl.certificate.location,omitempty"`
	SSLKeyLocation         string `yaml:"ssl.key.location,omitempty"`
	// SSLVerify is enable.ssl.certificate.verification: false skips the verification of
	// the brokers' certificates. nil means true.
	SSLVerify *bool `yaml:"enable.ssl.certificate.verification,omitempty"`
}

// Option names, as the Kafka tools spell them.
const (
	OptSecurityProtocol = "security.protocol"
	OptSASLMechanism    = "sasl.mechanism"
	OptSASLMechanisms   = "sasl.mechanisms" // librdkafka's name; the same setting
	OptSASLUsername     = "sasl.username"
	OptSASLPassword     = "sasl.password"
	OptSSLCALocation    = "ssl.ca.location"
	OptSSLCertLocation  = "ssl.certificate.location"
	OptSSLKeyLocation   = "ssl.key.location"
	OptSSLVerify        = "enable.ssl.certificate.verification"
)

// Options lists the option names Set takes.
func Options() []string {
	return []string{OptSecurityProtocol, OptSASLMechanism, OptSASLMechanisms, OptSASLUsername, OptSASLPassword,
		OptSSLCALocation, OptSSLCertLocation, OptSSLKeyLocation, OptSSLVerify}
}

// Security protocols and SASL mechanisms.
const (
	Plaintext     = "PLAINTEXT"
	SSL           = "SSL"
	SASLPlaintext = "SASL_PLAINTEXT"
	SASLSSL       = "SASL_SSL"

	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
)

// AddressError is a kafka:// address or an option that cannot be used. It never holds a
// password.
type AddressError struct{ Msg string }

func (e *AddressError) Error() string { return e.Msg }

func addrErrorf(format string, args ...any) error {
	return &AddressError{Msg: fmt.Sprintf(format, args...)}
}

// IsAddress reports whether s is meant as a Kafka address (it starts with kafka://).
func IsAddress(s string) bool {
	s = strings.TrimSpace(s)
	return len(s) >= len(Scheme)+3 && strings.EqualFold(s[:len(Scheme)+3], Scheme+"://")
}

// ParseURL reads kafka://BROKER[,BROKER…]/TOPIC[?OPTION=VALUE&…]: brokers as host or
// host:port (port 9092 by default; IPv6 hosts in brackets) and options by their Kafka
// names (see Options). The result is checked as Validate does.
func ParseURL(s string) (Config, error) {
	c, _, err := parseURL(s)
	if err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// parseURL reads an address as ParseURL does, without checking that its options fit
// together, and reports which options it names (by canonicalOption).
func parseURL(s string) (Config, map[string]bool, error) {
	given := strings.TrimSpace(s)
	if !IsAddress(given) {
		return Config{}, nil, addrErrorf("%q is not a Kafka address: want kafka://BROKER[,BROKER…]/TOPIC", redactURL(given))
	}
	rest := given[len(Scheme)+3:]
	rest, query, hasQuery := strings.Cut(rest, "?")
	if i := strings.IndexByte(rest, '#'); i >= 0 || strings.Contains(query, "#") {
		return Config{}, nil, addrErrorf("kafka address %q: a fragment (#…) has no meaning here", redactURL(given))
	}
	hosts, topic, ok := strings.Cut(rest, "/")
	if !ok || topic == "" {
		return Config{}, nil, addrErrorf("kafka address %q names no topic: want kafka://BROKER[,BROKER…]/TOPIC", redactURL(given))
	}
	if strings.Contains(hosts, "@") {
		return Config{}, nil, addrErrorf("kafka address %q: give credentials as sasl.username and sasl.password options, not before the broker", redactURL(given))
	}
	var c Config
	names := map[string]bool{}
	for h := range strings.SplitSeq(hosts, ",") {
		b, err := normalizeBroker(h)
		if err != nil {
			return Config{}, nil, err
		}
		c.Brokers = append(c.Brokers, b)
	}
	t, err := url.PathUnescape(topic)
	if err != nil {
		return Config{}, nil, addrErrorf("kafka address: topic %q: %v", topic, err)
	}
	c.Topic = t
	if hasQuery {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return Config{}, nil, addrErrorf("kafka address: options: %v", redactErr(err))
		}
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if len(vals[k]) > 1 {
				return Config{}, nil, addrErrorf("kafka address: option %s is given %d times", k, len(vals[k]))
			}
			if err := c.Set(k, vals[k][0]); err != nil {
				return Config{}, nil, err
			}
			names[canonicalOption(k)] = true
		}
	}
	return c, names, nil
}

// normalizeBroker checks host[:port] and adds the default port.
func normalizeBroker(h string) (string, error) {
	if h == "" {
		return "", addrErrorf("kafka address: an empty broker (two commas, or none before the topic)")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port: a bare host, or a bracketed IPv6 address.
		host, port = h, DefaultPort
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			host = h[1 : len(h)-1]
		}
	}
	if host == "" || strings.ContainsAny(host, " /?#@[]") || strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return "", addrErrorf("kafka address: broker %q is not host or host:port", h)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", addrErrorf("kafka address: broker %q: port %q is not a number from 1 to 65535", h, port)
	}
	return net.JoinHostPort(host, port), nil
}

// Set sets the option named key (see Options) to value.
func (c *Config) Set(key, value string) error {
	switch strings.ToLower(key) {
	case OptSecurityProtocol:
		c.SecurityProtocol = value
	case OptSASLMechanism, OptSASLMechanisms:
		c.SASLMechanism = value
	case OptSASLUsername:
		c.SASLUsername = value
	case OptSASLPassword:
		c.SASLPassword = value
	case OptSSLCALocation:
		c.SSLCALocation = value
	case OptSSLCertLocation:
		c.SSLCertificateLocation = value
	case OptSSLKeyLocation:
		c.SSLKeyLocation = value
	case OptSSLVerify:
		v, err := strconv.ParseBool(value)
		if err != nil {
			return addrErrorf("option %s=%q: want true or false", OptSSLVerify, value)
		}
		c.SSLVerify = &v
	default:
		return addrErrorf("unknown Kafka option %q (known: %s)", key, strings.Join(Options(), ", "))
	}
	return nil
}

// canonicalOption is the name of the setting an option name sets.
func canonicalOption(key string) string {
	k := strings.ToLower(key)
	if k == OptSASLMechanisms {
		return OptSASLMechanism
	}
	return k
}

// Validate checks that c names brokers and a valid topic, and that its options fit
// together: SASL settings only with a SASL protocol and then all of them, TLS settings only
// with SSL or SASL_SSL.
func (c *Config) Validate() error {
	if len(c.Brokers) == 0 {
		return addrErrorf("kafka: no broker given")
	}
	for i, b := range c.Brokers {
		nb, err := normalizeBroker(b)
		if err != nil {
			return err
		}
		c.Brokers[i] = nb
	}
	if err := checkTopic(c.Topic); err != nil {
		return err
	}
	proto := strings.ToUpper(cmpOr(c.SecurityProtocol, Plaintext))
	switch proto {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
	default:
		return addrErrorf("%s=%q: want %s, %s, %s or %s", OptSecurityProtocol, c.SecurityProtocol, Plaintext, SSL, SASLPlaintext, SASLSSL)
	}
	c.SecurityProtocol = proto
	sasl := proto == SASLPlaintext || proto == SASLSSL
	tls := proto == SSL || proto == SASLSSL
	if sasl {
		mech := strings.ToUpper(c.SASLMechanism)
		switch mech {
		case MechPlain, MechScramSHA256, MechScramSHA512:
		case "":
			return addrErrorf("%s=%s needs %s: %s, %s or %s", OptSecurityProtocol, proto, OptSASLMechanism, MechPlain, MechScramSHA256, MechScramSHA512)
		default:
			return addrErrorf("%s=%q is not supported: use %s, %s or %s", OptSASLMechanism, c.SASLMechanism, MechPlain, MechScramSHA256, MechScramSHA512)
		}
		c.SASLMechanism = mech
		if c.SASLUsername == "" || c.SASLPassword == "" {
			return addrErrorf("SASL needs %s and %s", OptSASLUsername, OptSASLPassword)
		}
	} else if c.SASLMechanism != "" || c.SASLUsername != "" || c.SASLPassword != "" {
		return addrErrorf("SASL options need %s=%s or %s", OptSecurityProtocol, SASLPlaintext, SASLSSL)
	}
	if !tls && (c.SSLCALocation != "" || c.SSLCertificateLocation != "" || c.SSLKeyLocation != "" || c.SSLVerify != nil) {
		return addrErrorf("TLS options need %s=%s or %s", OptSecurityProtocol, SSL, SASLSSL)
	}
	if (c.SSLCertificateLocation == "") != (c.SSLKeyLocation == "") {
		return addrErrorf("a client certificate needs both %s and %s", OptSSLCertLocation, OptSSLKeyLocation)
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkTopic checks a topic name as Kafka does: 1 to 249 of a-z A-Z 0-9 . _ -, and not
// "." or "..".
func checkTopic(t string) error {
	if t == "" {
		return addrErrorf("kafka: no topic given")
	}
	if len(t) > 249 || t == "." || t == ".." {
		return addrErrorf("kafka: %q is not a valid topic name (at most 249 characters, not . or ..)", t)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return addrErrorf("kafka: %q is not a valid topic name: use letters, digits, '.', '_' and '-'", t)
		}
	}
	return nil
}

// Node is the address of the topic for messages and checkpoints: kafka://BROKERS/TOPIC,
// without options (and so without credentials).
func (c *Config) Node() string {
	return Scheme + "://" + strings.Join(c.Brokers, ",") + "/" + c.Topic
}

// clientOpts are the franz-go options that reach the cluster as c says.
func (c *Config) clientOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ClientID("evtctl")}
	switch c.SecurityProtocol {
	case SSL, SASLSSL:
		f := tlsfiles.Files{CAFile: c.SSLCALocation, CertFile: c.SSLCertificateLocation, KeyFile: c.SSLKeyLocation,
			Insecure: c.SSLVerify != nil && !*c.SSLVerify}
		tc, err := f.Config()
		if err != nil {
			return nil, addrErrorf("kafka TLS: %v", err)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	switch c.SASLMechanism {
	case MechPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsMechanism()))
	case MechScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsSha256Mechanism()))
	case MechScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsSha512Mechanism()))
	}
	return opts, nil
}

// redactURL hides the values of sasl.password, and credentials before the brokers, in an
// address given for a message.
func redactURL(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		auth := s[i+3:]
		if j := strings.IndexAny(auth, "/?#"); j >= 0 {
			auth = auth[:j]
		}
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			s = s[:i+3] + "xxxxx" + s[i+3+at:]
		}
	}
	const key = OptSASLPassword + "="
	var b strings.Builder
	for {
		i := strings.Index(strings.ToLower(s), key)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := i + len(key)
		b.WriteString(s[:j])
		b.WriteString("xxxxx")
		end := strings.IndexAny(s[j:], "&#")
		if end < 0 {
			return b.String()
		}
		s = s[j+end:]
	}
}

// redactErr drops what a url error quotes of the input, which may hold a password.
func redactErr(err error) error {
	var ee url.EscapeError
	if errors.As(err, &ee) {
		return errors.New("invalid %-escape")
	}
	return errors.New("invalid query")
}
