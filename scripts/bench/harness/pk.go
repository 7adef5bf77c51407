package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["pk"] = pkMain }

// The target databases of harness pk: bench_a copied into each.
const (
	pkWithDB    = "pk_with"
	pkWithoutDB = "pk_without"
)

// pkMain is what a primary key costs during COPY: the source's bench_a
// (the 1GB dataset harness cdc -dataset 1GB leaves in database bench)
// copied in binary into a table with its primary key, and into one
// without, whose key is added after (as bootstrap does for the tables it
// creates), interleaved -rounds times, with the target's CPU. Writes
// OUT/pk-after-copy.json.
func pkMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("pk", flag.ContinueOnError)
	rounds := fs.Int("rounds", 2, "rounds, each copying into both tables")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 1 {
		return fmt.Errorf("pk: -rounds must be at least 1")
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	res := benchres.PKAfterCopy{Command: command("pk", args), Date: now(), Env: b.env}
	if err := query(ctx, sourcePort, "bench", "SELECT count(*) FROM bench_a", &res.Rows); err != nil {
		return fmt.Errorf("pk: the dataset of harness cdc -dataset 1GB (database bench): %w", err)
	}
	// Registered before the clusters stop (defers run last first), on a
	// context an interrupt does not cancel.
	defer func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = dropDB(c, targetPort, pkWithDB)
		_ = dropDB(c, targetPort, pkWithoutDB)
	}()
	for n := 1; n <= *rounds; n++ {
		r, err := pkRound(ctx, n)
		if err != nil {
			return fmt.Errorf("pk: round %d: %w", n, err)
		}
		say("pk", "round %d: with key %.2f s, without %.2f s + key %.2f s", n, r.WithPK, r.WithoutPKCopy, r.AddPK)
		res.Rounds = append(res.Rounds, r)
	}
	return writeResult(filepath.Join(resDir, "pk-after-copy.json"), res)
}

// pkRound copies bench_a into a table with its key, then into one
// without and adds the key, each after a checkpoint.
func pkRound(ctx context.Context, n int) (benchres.PKRound, error) {
	r := benchres.PKRound{Round: n}
	keyless := strings.Replace(benchTableDDL("bench_a"), "PRIMARY KEY", "NOT NULL", 1)
	for db, ddl := range map[string]string{pkWithDB: benchTableDDL("bench_a"), pkWithoutDB: keyless} {
		if err := recreateDB(ctx, targetPort, db); err != nil {
			return r, err
		}
		if err := runSQL(ctx, targetPort, db, ddl); err != nil {
			return r, err
		}
	}
	copyInto := func(db string) (float64, serverCPU, error) {
		if err := runSQL(ctx, targetPort, "postgres", "CHECKPOINT"); err != nil {
			return 0, serverCPU{}, err
		}
		mark, err := markCPU()
		if err != nil {
			return 0, serverCPU{}, err
		}
		secs, err := pipeTables(ctx, pipeSpec{srcPort: sourcePort, srcDB: "bench", tgtDB: db,
			to: "(FORMAT binary)", from: "(FORMAT binary)"}, []string{"bench_a"})
		if err != nil {
			return 0, serverCPU{}, err
		}
		if db == pkWithoutDB {
			t0 := time.Now()
			if err := runSQL(ctx, targetPort, db, "ALTER TABLE bench_a ADD PRIMARY KEY (id)"); err != nil {
				return 0, serverCPU{}, err
			}
			r.AddPK = round2(time.Since(t0).Seconds())
		}
		cpu, err := mark.since()
		return secs, cpu, err
	}
	secs, cpu, err := copyInto(pkWithDB)
	if err != nil {
		return r, err
	}
	r.WithPK, r.WithPKCPU = round2(secs), round2(cpu.target)
	if secs, cpu, err = copyInto(pkWithoutDB); err != nil {
		return r, err
	}
	r.WithoutPKCopy, r.WithoutPKCPU = round2(secs), round2(cpu.target)
	r.WithoutPKTotal = round2(r.WithoutPKCopy + r.AddPK)
	return r, nil
}
