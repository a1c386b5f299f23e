package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The project's root, from this package's directory.
const repoRoot = "../.."

// readmeMaxLines bounds the README: a front page, with the manual in docs/.
const readmeMaxLines = 250

// TestReadmeIsAFrontPage: the README stays a front page of at most readmeMaxLines lines.
func TestReadmeIsAFrontPage(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > readmeMaxLines {
		t.Fatalf("README.md has %d lines, at most %d are wanted: move the detail to a page of docs/", n, readmeMaxLines)
	}
}

// docFiles returns the Markdown files of the manual: README.md, ARCHITECTURE.md and every
// .md file under docs/, as slash paths from the project's root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "ARCHITECTURE.md"}
	err := fs.WalkDir(os.DirFS(repoRoot), "docs", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDocsLinksResolve: every relative link of README.md, ARCHITECTURE.md and the pages of
// docs/ names a file of the project, and every #anchor a heading of its target, by GitHub's
// rules for the anchors of headings.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	anchors := map[string]map[string]bool{} // by file
	links := map[string][]mdLink{}
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		anchors[f], links[f] = scanMarkdown(string(b))
	}
	checked := 0
	for _, f := range docFiles(t) {
		for _, l := range links[f] {
			target, anchor, _ := strings.Cut(l.target, "#")
			where := fmt.Sprintf("%s:%d: link %q", f, l.line, l.target)
			file := f
			if target != "" {
				file = path.Join(path.Dir(f), target)
				if file == ".." || strings.HasPrefix(file, "../") {
					t.Errorf("%s leads out of the project", where)
					continue
				}
				if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(file))); err != nil {
					t.Errorf("%s: no such file %s", where, file)
					continue
				}
			}
			checked++
			if anchor == "" {
				continue
			}
			heads, ok := anchors[file]
			if !ok {
				t.Errorf("%s: an anchor into %s, which is not a page of the manual", where, file)
			} else if !heads[anchor] {
				t.Errorf("%s: %s has no heading with the anchor #%s", where, file, anchor)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d links were found: the scanner misses them", checked)
	}
}

type mdLink struct {
	line   int
	target string
}

var (
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkRE     = regexp.MustCompile(`\]\(([^()\s]*)\)`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	mdLinkRE   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	schemeRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// scanMarkdown returns the anchors of a Markdown text's headings and its relative links,
// leaving out fenced code blocks and code spans.
func scanMarkdown(text string) (map[string]bool, []mdLink) {
	anchors := map[string]bool{}
	seen := map[string]int{}
	var links []mdLink
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			a := githubAnchor(m[2])
			if k := seen[a]; k > 0 {
				anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(line, "x"), -1) {
			if t := m[1]; t != "" && !schemeRE.MatchString(t) {
				links = append(links, mdLink{n, t})
			}
		}
	}
	return anchors, links
}

// githubAnchor is the anchor GitHub gives a heading: its text as shown (code spans and
// links as their text, emphasis without its marks), in lower case, with every character
// but letters, digits, '-', '_' and spaces removed and each space made a '-'.
func githubAnchor(heading string) string {
	text := mdLinkRE.ReplaceAllString(heading, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGithubAnchor(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"The terminal UI: `tail -i`, `replay -i`":           "the-terminal-ui-tail--i-replay--i",
		"`GET /events/stream` — a range as one stream":      "get-eventsstream--a-range-as-one-stream",
		"Contexts: named nodes":                             "contexts-named-nodes",
		"`evtctl forward`":                                  "evtctl-forward",
		"`/signal/<entity>` — Evented API signals":          "signalentity--evented-api-signals",
		"Reading a [Kafka](https://kafka.apache.org) topic": "reading-a-kafka-topic",
		"The log's format and **damage** handling":          "the-logs-format-and-damage-handling",
	} {
		if got := githubAnchor(heading); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestArchitectureNamesEveryPackage: ARCHITECTURE.md names, in a code span, every directory
// under cmd/, internal/ and pkg/ that holds Go code other than tests.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(repoRoot, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range codeSpanRE.FindAllString(string(b), -1) {
		named[strings.Trim(m, "`")] = true
	}
	var pkgs []string
	for _, top := range []string{"cmd", "internal", "pkg"} {
		err := fs.WalkDir(os.DirFS(repoRoot), top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return fs.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				if dir := path.Dir(p); !slices.Contains(pkgs, dir) {
					pkgs = append(pkgs, dir)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(pkgs) < 20 {
		t.Fatalf("found only %d packages: %v", len(pkgs), pkgs)
	}
	for _, p := range pkgs {
		if !named[p] {
			t.Errorf("ARCHITECTURE.md does not name the package %s: add a line for it (`%s`, and what it owns)", p, p)
		}
	}
}
