package main

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/internal/wordwrap"
)

// Help fitted to the terminal: cobra's templates, with functions that wrap the flags'
// usages to the terminal's width and reflow prose (Long texts, help topics) to it. The
// width is the terminal's (see iostreams.TerminalWidth), or 80 when stdout is not one.

const (
	helpWidthAnnotation = "evtctl.help-width" // on the root: the width help is fitted to
	notTerminalWidth    = 80                  // the width of help written to a file or a pipe
	maxProseWidth       = 100                 // prose is not spread wider than this, to stay readable
	minHelpWidth        = 20
)

func init() {
	cobra.AddTemplateFuncs(map[string]any{
		"fitText":      func(text string, c *cobra.Command) string { return reflow(text, proseWidth(c)) },
		"flagUsages":   func(fs *pflag.FlagSet, c *cobra.Command) string { return fs.FlagUsagesWrapped(helpWidthOf(c)) },
		"entry":        func(name, short string, c *cobra.Command) string { return entry(name, short, proseWidth(c)) },
		"topicPadding": topicPadding,
	})
}

// setHelpWidth makes root's help, and its commands', fit the width of streams' stdout.
func setHelpWidth(root *cobra.Command, streams *iostreams.IOStreams) {
	w := streams.TerminalWidth()
	if w <= 0 {
		w = notTerminalWidth
	}
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[helpWidthAnnotation] = strconv.Itoa(max(w, minHelpWidth))
	root.SetHelpTemplate(helpTemplate)
	root.SetUsageTemplate(usageTemplate)
}

// helpWidthOf is the width c's help is fitted to.
func helpWidthOf(c *cobra.Command) int {
	if w, err := strconv.Atoi(c.Root().Annotations[helpWidthAnnotation]); err == nil {
		return w
	}
	return notTerminalWidth
}

func proseWidth(c *cobra.Command) int { return min(helpWidthOf(c), maxProseWidth) }

// helpTemplate is cobra's, with the Long text reflowed.
const helpTemplate = `{{with (or .Long .Short)}}{{fitText . $ | trimTrailingWhitespaces}}

{{end}}{{if or .Runnable .HasSubCommands}}{{.UsageString}}{{end}}`

// usageTemplate is cobra's, with the commands' and topics' lines and the flags fitted to
// the width. Examples are shown as they are written.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}{{if eq (len .Groups) 0}}

Available Commands:{{range $cmds}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
{{entry (rpad .Name .NamePadding) .Short $}}{{end}}{{end}}{{else}}{{range $group := .Groups}}

{{.Title}}{{range $cmds}}{{if (and (eq .GroupID $group.ID) (or .IsAvailableCommand (eq .Name "help")))}}
{{entry (rpad .Name .NamePadding) .Short $}}{{end}}{{end}}{{end}}{{if not .AllChildCommandsHaveGroup}}

Additional Commands:{{range $cmds}}{{if (and (eq .GroupID "") (or .IsAvailableCommand (eq .Name "help")))}}
{{entry (rpad .Name .NamePadding) .Short $}}{{end}}{{end}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{flagUsages .LocalFlags $ | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{flagUsages .InheritedFlags $ | trimTrailingWhitespaces}}{{end}}{{if .HasHelpSubCommands}}

Additional help topics:{{range .Commands}}{{if .IsAdditionalHelpTopicCommand}}
{{entry (rpad .CommandPath (topicPadding $)) .Short $}}{{end}}{{end}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

// entry is a line of a list of commands: "  NAME SHORT", SHORT wrapped to width under
// itself.
func entry(name, short string, width int) string {
	return hanging("  "+name+" ", short, width)
}

// topicPadding is the width of the longest command path of c's help topics, and a space.
func topicPadding(c *cobra.Command) int {
	n := 0
	for _, sub := range c.Commands() {
		if sub.IsAdditionalHelpTopicCommand() {
			n = max(n, textWidth(sub.CommandPath())+1)
		}
	}
	return n
}

// hanging is head followed by text wrapped to width, its further lines indented as far as
// head is wide.
func hanging(head, text string, width int) string {
	col := textWidth(head)
	lines := wordwrap.Lines(text, max(width-col, minHelpWidth), textWidth)
	if len(lines) == 0 {
		return strings.TrimRight(head, " ")
	}
	return head + strings.Join(lines, "\n"+strings.Repeat(" ", col))
}

// textWidth is the width of help text in columns: its characters, all narrow.
func textWidth(s string) int { return utf8.RuneCountInString(s) }

// definition matches an item of an indented list of definitions: a term, two spaces or
// more, and its description, which may go on in lines indented as far as it starts.
var definition = regexp.MustCompile(`^( +\S+(?: \S+)*  +)\S`)

// reflow fits text to width: a paragraph of lines that start at the margin is refilled,
// and so is the description of an indented definition (a term, two spaces or more, and a
// description, continued under itself); any other indented line (an example, a table) is
// kept as it is.
func reflow(text string, width int) string {
	lines := strings.Split(text, "\n")
	out := make([]string, 0, len(lines))
	indented := func(l string) bool { return strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") }
	blank := func(l string) bool { return strings.TrimSpace(l) == "" }
	for i := 0; i < len(lines); {
		line := lines[i]
		switch m := definition.FindStringSubmatch(line); {
		case blank(line):
			out = append(out, "")
			i++
		case !indented(line):
			j := i + 1
			for j < len(lines) && !blank(lines[j]) && !indented(lines[j]) {
				j++
			}
			out = append(out, wordwrap.Lines(strings.Join(lines[i:j], " "), width, textWidth)...)
			i = j
		case m != nil:
			head := m[1]
			indent := strings.Repeat(" ", len(head))
			desc := []string{line[len(head):]}
			j := i + 1
			for j < len(lines) && strings.HasPrefix(lines[j], indent) && !indented(lines[j][len(indent):]) && !blank(lines[j]) {
				desc = append(desc, lines[j][len(indent):])
				j++
			}
			out = append(out, strings.Split(hanging(head, strings.Join(desc, " "), width), "\n")...)
			i = j
		default:
			out = append(out, line)
			i++
		}
	}
	return strings.Join(out, "\n")
}
