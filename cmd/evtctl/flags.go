package main

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// byteSize is a flag value of bytes written as 1048576, 512KiB, 64MB, 1GiB and so on.
type byteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
	{"tb", 1e12}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3},
	{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1},
}

func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("%q is not a size: write bytes such as 1048576, 64MiB or 1GB", s)
	}
	return int64(f * float64(mult)), nil
}

func formatSize(n int64) string {
	switch {
	case n == 0:
		return "0"
	case n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) String() string { return formatSize(int64(*b)) }
func (b *byteSize) Type() string   { return "size" }
func (b *byteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// choice is one value an enum flag takes.
type choice struct {
	name string
	// help says what the value does, in a few words: in --help after the name, in
	// parentheses, and beside the value where a shell shows completions. "" for none.
	help string
	// alias is the value this name stands for, stored in its place; "" for a value of its
	// own.
	alias string
}

// enumValue is a string flag that takes one of a fixed list of values. The list is written
// once, where the flag is declared: it validates what is given (case aside), goes into the
// flag's help, and is what shells complete.
type enumValue struct {
	p       *string
	choices []choice
}

// enumVarP defines an enum flag that stores into p, def by default ("" may stand for a
// default decided later). In usage, "{values}" is replaced by the list: "a, b (help) or c".
func enumVarP(f *pflag.FlagSet, p *string, name, short, def, usage string, choices ...choice) *enumValue {
	e := &enumValue{p: p, choices: choices}
	if def != "" && e.lookup(def) != def {
		panic("enum flag --" + name + ": default " + def + " is not one of its values")
	}
	*p = def
	f.VarP(e, name, short, strings.Replace(usage, "{values}", e.describe(), 1))
	return e
}

// enumVar is enumVarP without a shorthand.
func enumVar(f *pflag.FlagSet, p *string, name, def, usage string, choices ...choice) *enumValue {
	return enumVarP(f, p, name, "", def, usage, choices...)
}

// lookup returns the value s stands for, or "" when it is none of the choices.
func (e *enumValue) lookup(s string) string {
	for _, c := range e.choices {
		if strings.EqualFold(s, c.name) {
			return cmp.Or(c.alias, c.name)
		}
	}
	return ""
}

// describe lists the values for help: "a, b (what b does) or c".
func (e *enumValue) describe() string {
	items := make([]string, len(e.choices))
	for i, c := range e.choices {
		items[i] = c.name
		if c.help != "" {
			items[i] += " (" + c.help + ")"
		}
	}
	return orList(items)
}

// names lists the values for an error message: "a, b or c".
func (e *enumValue) names() string {
	items := make([]string, len(e.choices))
	for i, c := range e.choices {
		items[i] = c.name
	}
	return orList(items)
}

func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

func (e *enumValue) String() string {
	if e.p == nil { // pflag makes a zero value to find the flag's zero
		return ""
	}
	return *e.p
}

func (e *enumValue) Type() string { return "string" }

func (e *enumValue) Set(s string) error {
	v := e.lookup(s)
	if v == "" {
		return fmt.Errorf("must be %s", e.names())
	}
	*e.p = v
	return nil
}

// complete offers the values that start with prefix, each with its help.
func (e *enumValue) complete(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, c := range e.choices {
		if strings.HasPrefix(c.name, prefix) {
			if c.help != "" {
				out = append(out, c.name+"\t"+c.help)
			} else {
				out = append(out, c.name)
			}
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
