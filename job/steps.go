package job

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// step is one named step of a bootstrap or an add-tables, bound to the
// command's state. do does the step's work; record, when set, records the
// state the step made true, and runs only once do succeeded. records names
// that state, for the log and the plans' tests.
type step struct {
	name    string
	records string
	do      func(ctx context.Context) error
	record  func(ctx context.Context) error
}

// runSteps runs steps in order: each step's work, then what it
// records. The first error stops it: a step that failed records nothing,
// and what the steps before it recorded tells a rerun where to resume.
func runSteps(ctx context.Context, log *slog.Logger, command string, steps []step) error {
	for _, st := range steps {
		began := time.Now()
		if st.do != nil {
			if err := st.do(ctx); err != nil {
				return err
			}
		}
		if st.record != nil {
			if err := st.record(ctx); err != nil {
				return err
			}
		}
		log.Debug(command+" step done", "step", st.name, "recorded", st.records, "seconds", fmt.Sprintf("%.2f", time.Since(began).Seconds()))
	}
	return nil
}

// stepNames are the names of steps, in order: what a plan's test reads.
func stepNames(steps []step) []string {
	names := make([]string, len(steps))
	for i, st := range steps {
		names[i] = st.name
	}
	return names
}
