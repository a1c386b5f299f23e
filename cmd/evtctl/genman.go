package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/evtctl/evtctl/internal/iostreams"
)

// newCmdGenMan writes the manual pages that release archives ship. It is hidden: users
// read the pages, they do not make them.
func newCmdGenMan(streams *iostreams.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:    "gen-man DIR",
		Short:  "Write manual pages for every command into DIR",
		Hidden: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("gen-man takes one directory")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true // pages stay the same from build to build
			header := &doc.GenManHeader{Title: "EVTCTL", Section: "1", Source: "evtctl " + versionString(), Manual: "evtctl manual"}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("writing manual pages: %w", err)
			}
			fmt.Fprintf(streams.ErrOut, "wrote manual pages to %s\n", args[0])
			return nil
		},
	}
}
