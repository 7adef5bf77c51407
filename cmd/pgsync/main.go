// Command pgsync keeps a target PostgreSQL in sync with a source through
// logical replication. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgsync/pgsync/cmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cmd.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
