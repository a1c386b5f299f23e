package kafka

import (
	"maps"
	"slices"
	"strings"

	"github.com/evtctl/evtctl/pkg/client"
)

// A Kafka topic is a source of the client's: kafka:// addresses.
func init() {
	client.Register(client.Driver{Schemes: []string{Scheme}, Open: open, IsCursor: isCursorOrPosition})
}

// open opens the source of a kafka:// address (see ConfigFor).
func open(node string, opts client.Options) (client.Source, error) {
	cfg, err := ConfigFor(node, opts)
	if err != nil {
		return nil, err
	}
	return New(cfg)
}

// ConfigFor is the Config of a kafka:// address as a client of it is given: the options in
// the address win over the client's settings (a context's); the client's CA file and
// Insecure are the TLS options ssl.ca.location and enable.ssl.certificate.verification=false
// where neither names them. A bearer token has no meaning for Kafka and is refused.
func ConfigFor(node string, opts client.Options) (Config, error) {
	cfg, given, err := parseURL(node)
	if err != nil {
		return Config{}, err
	}
	if opts.Token != "" {
		return Config{}, addrErrorf("a Kafka topic takes no bearer token (--token, $EVTCTL_TOKEN or a context's token): give %s and %s", OptSASLUsername, OptSASLPassword)
	}
	settings := map[string]string{}
	for k, v := range opts.Settings {
		settings[strings.ToLower(k)] = v
	}
	if opts.CAFile != "" {
		if _, ok := settings[OptSSLCALocation]; !ok {
			settings[OptSSLCALocation] = opts.CAFile
		}
	}
	if opts.Insecure {
		if _, ok := settings[OptSSLVerify]; !ok {
			settings[OptSSLVerify] = "false"
		}
	}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		if given[canonicalOption(k)] {
			continue
		}
		if err := cfg.Set(k, settings[k]); err != nil {
			return Config{}, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
