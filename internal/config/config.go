// Package config reads and writes evtctl's configuration file: named contexts, each a node
// with the tokens, TLS settings or source options to reach it, and which context is current.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/evtctl/evtctl/internal/atomicfile"
)

// Context is a named node and how to reach it.
type Context struct {
	Node        string `yaml:"node"`
	Token       string `yaml:"token,omitempty"`        // bearer token for reading
	IngestToken string `yaml:"ingest-token,omitempty"` // bearer token for emit; Token when empty
	CAFile      string `yaml:"ca-file,omitempty"`
	Insecure    bool   `yaml:"insecure,omitempty"`
	// Kafka holds the options of a kafka:// node by the names the Kafka tools give them
	// (security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, …).
	Kafka map[string]string `yaml:"kafka,omitempty"`
}

// Options are the options the context keeps for its node's source, by their names: a
// kafka:// node's; nil for a node that takes none.
func (c *Context) Options() map[string]string {
	if schemeOf(c.Node) == "kafka" {
		return c.Kafka
	}
	return nil
}

// SetOptions keeps opts as the options of the context's node, which must be one whose
// source takes options (kafka://).
func (c *Context) SetOptions(opts map[string]string) error {
	if len(opts) == 0 {
		c.Kafka = nil
		return nil
	}
	if schemeOf(c.Node) != "kafka" {
		return fmt.Errorf("options are settings of a kafka:// node; %s takes a token, a CA file and insecure instead", c.Node)
	}
	c.Kafka = opts
	return nil
}

// SecretOption reports whether an option's value is a secret, never printed back: a
// password, a secret or a token.
func SecretOption(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "password") || strings.Contains(n, "secret") || strings.Contains(n, "token")
}

// schemeOf is the scheme of a node's address, lower case; "" for host:port.
func schemeOf(node string) string {
	scheme, _, ok := strings.Cut(strings.TrimSpace(node), "://")
	if !ok {
		return ""
	}
	return strings.ToLower(scheme)
}

// File is the configuration file.
type File struct {
	CurrentContext string              `yaml:"current-context,omitempty"`
	Contexts       map[string]*Context `yaml:"contexts,omitempty"`
}

// MaxSize bounds the configuration file; a larger one is refused rather than read.
const MaxSize = 1 << 20

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidName reports whether name can name a context: letters, digits, '.', '_' and '-',
// starting with a letter or digit, at most 63 characters.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("context name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit (at most 63)", name)
	}
	return nil
}

// Path is where the file lives: $XDG_CONFIG_HOME/evtctl/config.yaml, or the platform's user
// configuration directory (~/.config on Linux, ~/Library/Application Support on macOS,
// %AppData% on Windows).
func Path() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "evtctl", "config.yaml"), nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "evtctl", "config.yaml"), nil
}

// Parse decodes and checks a configuration file's bytes. Unknown keys are errors, so that
// a misspelt setting is not silently ignored.
func Parse(data []byte) (*File, error) {
	f := &File{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil && !errors.Is(err, io.EOF) {
		return nil, describeYAMLError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document")
	}
	if f.Contexts == nil {
		f.Contexts = map[string]*Context{}
	}
	for name, c := range f.Contexts {
		if err := ValidName(name); err != nil {
			return nil, err
		}
		if c == nil || c.Node == "" {
			return nil, fmt.Errorf("context %q has no node", name)
		}
		if len(c.Kafka) > 0 && schemeOf(c.Node) != "kafka" {
			return nil, fmt.Errorf("context %q: kafka options for %s, which is not a kafka:// node", name, c.Node)
		}
	}
	if f.CurrentContext != "" && f.Contexts[f.CurrentContext] == nil {
		return nil, fmt.Errorf("current-context %q is not among the contexts", f.CurrentContext)
	}
	return f, nil
}

// Load reads the file at path. A missing file is an empty configuration.
func Load(path string) (*File, error) {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &File{Contexts: map[string]*Context{}}, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxSize)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Save writes the file at path atomically, readable by its owner only (it may hold tokens).
func (f *File) Save(path string) error {
	data, err := yaml.Marshal(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, data)
}

// Names lists the contexts' names in order.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.Contexts))
	for n := range f.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Current returns the current context, or nil when none is set.
func (f *File) Current() (string, *Context) {
	if f.CurrentContext == "" {
		return "", nil
	}
	return f.CurrentContext, f.Contexts[f.CurrentContext]
}

// TooOpen reports whether the file at path holds tokens yet can be read by others.
func TooOpen(path string, f *File) bool {
	if runtime.GOOS == "windows" {
		return false
	}
	secret := false
	for _, c := range f.Contexts {
		secret = secret || c.Token != "" || c.IngestToken != ""
		for k, v := range c.Kafka {
			secret = secret || SecretOption(k) && v != ""
		}
	}
	st, err := os.Stat(path)
	return secret && err == nil && st.Mode().Perm()&0o077 != 0
}

var unknownFieldRE = regexp.MustCompile(`field (\S+) not found in type \S+`)

// describeYAMLError says what is wrong in the file's terms, without Go's type names.
func describeYAMLError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		m = unknownFieldRE.ReplaceAllString(m, "unknown key $1")
		msgs[i] = strings.ReplaceAll(m, "config.", "")
	}
	return errors.New(strings.Join(msgs, "; "))
}
