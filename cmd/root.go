// Package cmd wires pgsync's command line: it parses flags and the
// configuration, opens connections and calls the snapshot, replication,
// apply and verify packages. It holds no replication logic of its own.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/pgsync/pgsync/config"
	"github.com/pgsync/pgsync/job"
)

// Exit statuses.
const (
	ExitOK     = 0
	ExitFailed = 1 // the operation failed or found a difference
	ExitUsage  = 2 // bad flags or configuration
)

// exitError carries an exit status with the message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func failf(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

type app struct {
	commandRan bool // cobra parsed the command line and called a command
	configPath string
	stdout     io.Writer
	stderr     io.Writer
	log        *slog.Logger
}

// Execute runs the command line and returns the process exit status. Every
// error is printed as one line on stderr.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, log: slog.New(slog.NewTextHandler(stderr, nil))}
	logFormat := os.Getenv("PGSYNC_LOG_FORMAT")
	if logFormat == "" {
		logFormat = "auto"
	}
	root := &cobra.Command{
		Use:   "pgsync",
		Short: "Keep a target PostgreSQL in sync with a source through logical replication",
		Long: `pgsync keeps a target PostgreSQL database in sync with a source database
through logical replication, to move a database with a short switch-over.
Every command reads the job from the configuration file (-c, default
pgsync.toml; keys in docs/reference.md).

A move, in order:
  pgsync check        read-only preflight: OK, WARN or FAIL with the fix
  pgsync bootstrap    publication, slot, missing target tables, parallel copy
  pgsync run          stream and apply every change exactly once (a service)
  pgsync status       lag in bytes and seconds, retained WAL
  pgsync cutover      wait for the target, set sequences, verify, report

Exit status: 0 success, 1 the command failed (one line on stderr says why),
2 a bad flag or configuration. Passwords are never printed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Errors from before this hook are usage errors (see below).
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		a.commandRan = true
		return a.setLogFormat(logFormat)
	}
	root.PersistentFlags().StringVarP(&a.configPath, "config", "c", "pgsync.toml", "configuration file")
	root.PersistentFlags().StringVar(&logFormat, "log-format", logFormat, "log lines on stderr: text, json, or auto (text on a terminal, json otherwise); PGSYNC_LOG_FORMAT sets the default")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: ExitUsage, err: err} })
	root.AddCommand(a.bootstrapCmd(), a.runCmd(), a.statusCmd(), a.checkCmd(), a.verifyCmd(), a.sequencesCmd(), a.cutoverCmd(), a.addTablesCmd(), a.teardownCmd(), a.versionCmd())
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	ran, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	err = remedy(err, ran.Name())
	code := ExitFailed
	var ee *exitError
	var ce *config.Error
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case errors.As(err, &ce):
		code = ExitUsage
	case !a.commandRan:
		// cobra failed before any command ran: an unknown command or
		// flag, or arguments a command does not accept.
		code = ExitUsage
	}
	fmt.Fprintf(stderr, "pgsync: %s\n", job.OneLine(err.Error()))
	return code
}

// setLogFormat chooses the handler of the log lines on stderr.
func (a *app) setLogFormat(format string) error {
	switch format {
	case "auto":
		if isTerminal(a.stderr) {
			return nil
		}
		fallthrough
	case "json":
		a.log = slog.New(slog.NewJSONHandler(a.stderr, nil))
	case "text":
	default:
		return failf(ExitUsage, "--log-format %q: want text, json or auto", format)
	}
	return nil
}

func (a *app) loadConfig() (*config.Config, error) {
	return config.Load(a.configPath)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
