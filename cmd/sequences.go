package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/job"
)

func (a *app) sequencesCmd() *cobra.Command {
	var asJSON, dryRun bool
	c := &cobra.Command{
		Use:   "sequences",
		Short: "Set the target's sequences of the job's tables to the source's values, never backwards",
		Long: `Logical replication carries rows, not sequence values: on the target, the
sequences of the job's tables (serial and identity columns, and sequences
named in column defaults) stay where bootstrap left them. sequences sets
each one that is behind to its value on the source, and never moves one
backwards. Run it (or cutover, which runs it) before the application writes
to the target.

Exit status: 0 every sequence is at or past the source's value, 1 a
sequence is missing on the target (named) or an error.`,
		Args: cobra.NoArgs,
		RunE: a.withJob(func(ctx context.Context, j *job.Job) error {
			seqs, moved, err := j.Sequences(ctx, dryRun)
			if err != nil && !errors.Is(err, job.ErrSequenceMissing) {
				return err
			}
			a.printSequences(seqs, moved, dryRun, asJSON)
			return err
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be set, set nothing")
	return c
}

// sequenceReport is one line of the sequences report.
type sequenceReport struct {
	job.Sequence
	// Action is "set", "would set", "up to date" or "missing on target".
	Action string `json:"action"`
}

func (a *app) printSequences(seqs, moved []job.Sequence, dryRun, asJSON bool) {
	set := make(map[string]bool, len(moved))
	for _, s := range moved {
		set[s.Source] = true
	}
	report := make([]sequenceReport, 0, len(seqs))
	counts := map[string]int{}
	for _, s := range seqs {
		r := sequenceReport{Sequence: s, Action: "up to date"}
		switch {
		case s.Target == "":
			r.Action = "missing on target"
		case set[s.Source]:
			r.Action = "set"
		case dryRun && s.Behind():
			r.Action = "would set"
		}
		counts[r.Action]++
		report = append(report, r)
	}
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
		return
	}
	for _, r := range report {
		if r.Target == "" {
			fmt.Fprintf(a.stdout, "%s (%s.%s): source %d: missing on the target\n", r.Source, r.Table, r.Column, r.SourceLast)
			continue
		}
		fmt.Fprintf(a.stdout, "%s (%s.%s): source %d, target %d: %s\n", r.Target, r.Table, r.Column, r.SourceLast, r.TargetLast, r.Action)
	}
	fmt.Fprintf(a.stdout, "%d sequences: %d set, %d would be set, %d up to date, %d missing on the target\n",
		len(seqs), counts["set"], counts["would set"], counts["up to date"], counts["missing on target"])
}
