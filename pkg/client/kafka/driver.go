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

// open opens the source of a kafka:// address. The options in the address win over the
// client's settings (a context's); the client's CA file and --insecure are the TLS
// options ssl.ca.location and enable.ssl.certificate.verification=false where neither
// names them. A bearer token has no meaning for Kafka and is refused.
func open(node string, opts client.Options) (client.Source, error) {
	cfg, given, err := parseURL(node)
	if err != nil {
		return nil, err
	}
	if opts.Token != "" {
		return nil, addrErrorf("a Kafka topic takes no bearer token (--token, $EVTCTL_TOKEN or a context's token): give %s and %s", OptSASLUsername, OptSASLPassword)
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
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return New(cfg)
}
