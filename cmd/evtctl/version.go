package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/evtctl/evtctl/internal/iostreams"
)

// Set by the release build with -ldflags "-X main.version=... -X main.commit=... -X main.date=...".
var (
	version = ""
	commit  = ""
	date    = ""
)

// buildVersion reports the version, falling back to what `go install` records.
func buildVersion() (v, c, d string) {
	v, c, d = version, commit, date
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && c == "":
				c = s.Value
			case s.Key == "vcs.time" && d == "":
				d = s.Value
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	return v, c, d
}

func versionString() string {
	v, c, d := buildVersion()
	s := v
	if c != "" {
		s += " (" + shortCommit(c)
		if d != "" {
			s += ", " + d
		}
		s += ")"
	}
	return s
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func newCmdVersion(streams *iostreams.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of evtctl",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v, c, d := buildVersion()
			fmt.Fprintf(streams.Out, "evtctl %s\n", v)
			if c != "" {
				fmt.Fprintf(streams.Out, "commit: %s\n", c)
			}
			if d != "" {
				fmt.Fprintf(streams.Out, "built: %s\n", d)
			}
			fmt.Fprintf(streams.Out, "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
