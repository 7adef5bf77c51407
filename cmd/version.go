package cmd

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X github.com/pgsync/pgsync/cmd.Version=...".
var Version = "dev"

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Long: `version prints pgsync's version, the commit it was built from and the Go
version.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			rev := "unknown"
			if info, ok := debug.ReadBuildInfo(); ok {
				for _, s := range info.Settings {
					if s.Key == "vcs.revision" {
						rev = s.Value
					}
				}
			}
			fmt.Fprintf(a.stdout, "pgsync %s (commit %s, %s)\n", Version, rev, runtime.Version())
			return nil
		},
	}
}
