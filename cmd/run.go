package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/apply"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/replication"
)

func (a *app) runCmd() *cobra.Command {
	var untilCaughtUp bool
	c := &cobra.Command{
		Use:   "run",
		Short: "Stream changes from the slot and apply them to the target, exactly once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			opts := replication.RunOptions{
				StreamOptions: replication.StreamOptions{
					Names:            names(cfg),
					MaxInflightBytes: cfg.Tuning.MaxInflightBytes,
					Logger:           a.log,
				},
				SourceURL:     cfg.SourceURL,
				UntilCaughtUp: untilCaughtUp,
			}
			applyOpts := apply.Options{Job: cfg.Job, MaxBatchRows: cfg.Tuning.MaxBatchRows, MaxBatchBytes: cfg.Tuning.MaxBatchBytes}
			return replication.Run(cmd.Context(), opts, func(ctx context.Context) (replication.Target, error) {
				conn, err := pgconnect.Connect(ctx, "target", cfg.TargetURL)
				if err != nil {
					return nil, err
				}
				return apply.New(conn, applyOpts), nil
			})
		},
	}
	c.Flags().BoolVar(&untilCaughtUp, "until-caught-up", false, "exit 0 once every transaction committed on the source before the start is applied and acknowledged")
	return c
}
