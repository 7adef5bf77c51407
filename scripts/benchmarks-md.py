#!/usr/bin/env python3
# Writes docs/benchmarks.md from the JSON in bench-results/, so that no figure
# is typed by hand: python3 scripts/benchmarks-md.py after the benchmark scripts.
import glob, json, os, re, statistics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
R = os.path.join(ROOT, 'bench-results')
def j(p): return json.load(open(p))

b100, b1g = j(f'{R}/bench-100mb.json'), j(f'{R}/bench-1gb.json')
copy = j(f'{R}/copy.json')
c10 = j(f'{R}/copy-10gb/copy.json')
big2m = j(f'{R}/bigtxn.json')
rj = j(f'{R}/rejected/bench-1gb-ranges-892fe5e.json')
catch = {os.path.basename(os.path.dirname(p)): j(p) for p in sorted(glob.glob(f'{R}/catchup-runs/*/catchup.json'))}
prof = j(f'{R}/catchup-profile/catchup.json')
bigs = {p.split('/')[-2]: j(p) for p in sorted(glob.glob(f'{R}/bigtxn-runs/*/bigtxn.json'))}
ins = [json.loads(l) for l in open(f'{R}/insert-copy.jsonl') if l.strip()]
commit = b100['environment']['pgsync_commit']
pg = b100['environment']['postgresql']
pk = j(f'{R}/pk-after-copy.json') if os.path.exists(f'{R}/pk-after-copy.json') else None

speed_commit = j(f'{R}/stream.json')['environment']['pgsync_commit'] if os.path.exists(f'{R}/stream.json') else 'none'

def med_hot(path):
    vals = {}
    for line in open(path):
        m = re.match(r'Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+(?:[\d.]+ MB/s\s+)?(\d+) B/op\s+(\d+) allocs/op', line)
        if m:
            vals.setdefault(m.group(1), []).append((float(m.group(2)), int(m.group(3)), int(m.group(4))))
    return {k: (statistics.median(x[0] for x in v), max(x[1] for x in v), max(x[2] for x in v), len(v)) for k, v in vals.items()}
hot_new, hot_old = med_hot(f'{R}/hotpath.txt'), med_hot(f'{R}/hotpath-bfb5f65.txt')

pause = [v for k, v in catch.items() if k.endswith('-pause')]
nopause = [v for k, v in catch.items() if k.endswith('-nopause')]
def rng(xs, f='%.2f'):
    xs = sorted(xs)
    lo, hi = f % xs[0], f % xs[-1]
    return lo if lo == hi else lo + '-' + hi

out = []
w = out.append
pk_note = ''
if pk and pk['environment']['pgsync_commit'] != commit:
    pk_note = f" and `scripts/pk-bench.sh` (at `{pk['environment']['pgsync_commit']}`; it times PostgreSQL alone, no pgsync)"
w(f'''# pgsync benchmarks

Every figure here was measured on the machine described below, by the
command named beside it; the raw samples and one JSON summary per run are in
`bench-results/`. Nothing is estimated or typed by hand: this page is
generated from those JSON files. Every pgsync figure stands next to what
PostgreSQL's own logical replication (and, for the copy, a plain `COPY ...
TO STDOUT | COPY ... FROM STDIN` pipe) did with the same data, measured
minutes apart in the same script on the same machine.

The sections of the speed issue (issue 18: its targets table, one large
transaction, the source far away, the copy at round trips, COPY FREEZE, a
whole database into an empty target) come from one run of
`scripts/speed-bench.sh` at commit `{speed_commit}`. All other figures come from one run of the scripts at commit `{commit}`, one
after the other{'' if c10['environment']['pgsync_commit'] == commit else ", except the 10 GB copy (commit `" + c10['environment']['pgsync_commit'] + "`: its code differs only in when a table is cut into ranges)"},
except the many-jobs table at the end (commit `2b06f6d`, not rerun){pk_note}.
Two experiments ran apart from it, each interleaved with another build (see
"Ways tried"): `synchronous_commit = off` on the target, and the autovacuum
hold during the copy against the commit before it.

## Reproducing it

```sh
make test                                  # installs PostgreSQL 15 if missing
bash scripts/bench-all.sh                  # every script below but scale.sh, in this order, then this page
bash scripts/speed-bench.sh                # issue 18's: stream, catch-up (+ profile), rtt, copy at RTTs, freeze, schema; then this page
bash scripts/stream-bench.sh               # SIZES="1000000 5000000" PGSYNC_BASE= a build to compare
RTTS="0 2 10" RUNS=3 bash scripts/rtt-bench.sh
bash scripts/freeze-bench.sh               # ROWS=4000000: VACUUM (FREEZE) after a load with and without COPY FREEZE
bash scripts/schema-bench.sh               # a whole database into an empty target, beside pgcopydb
bash scripts/hotpath-bench.sh              # hot path, no server, against BASE=bfb5f65, pinned and interleaved
bash scripts/bench.sh                      # DATASET=100MB (default) or 1GB, CDC_SECONDS=60
bash scripts/catchup-bench.sh              # BACKLOG_TXNS=5000; the floor and peek too
bash scripts/copy-bench.sh                 # ROWS=8000000 TABLES=1 STREAMS="1 2 4"
ROWS=80000000 TABLES=2 COMPARE=0 STREAMS=2 RESULTS=bench-results/copy-10gb bash scripts/copy-bench.sh
bash scripts/bigtxn-bench.sh               # BIG_ROWS=1000000 (PGSYNC= another build to compare)
go run ./scripts/insert-copy-bench -url postgres://postgres@127.0.0.1:57433/postgres
bash scripts/pk-bench.sh                   # after bench.sh DATASET=1GB: a primary key during COPY or after
bash scripts/autovacuum-hold-bench.sh      # BASE=00286dc ROUNDS=3: the copy with and without the autovacuum hold
PGSYNC=/tmp/pgsync-async RESULTS=bench-results/experiments/async-commit/2-async bash scripts/catchup-bench.sh
                                           # one experiment run: a build whose pgconnect sets synchronous_commit = off
bash scripts/scale.sh                      # WORKERS="5 10 20", SCALE_SECONDS=60
```

The scripts start their own two clusters (`scripts/local-pg.sh`, ports
57432/57433 under `/tmp/pgsync-bench-pg`), leave them running for a second
look, and write into `bench-results/`. RSS and CPU % of pgsync are read from
`/proc` every 0.25 s. CPU seconds of the servers' processes are read from
`/proc` too: for a process that ends with the run (pgsync's walsender and
target backend, the COPY backends, the native table sync workers), as the
growth of the postmaster's children CPU over the run; for one that lives on
(the native walsender and apply worker, both started by the run), its own
counters. pgsync's own CPU seconds are its last log line's `cpu_s`.

## Environment

| | |
|---|---|
| Machine | {b100['environment']['cpu']} (virtual), 2 cores, 24 GiB RAM, Debian 12 |
| PostgreSQL | {pg} (Debian package), two clusters on 127.0.0.1 of the same machine |
| Source | `wal_level=logical`, `max_slot_wal_keep_size=4GB`, `wal_sender_timeout=30s`, `shared_buffers=256MB`, `fsync=on` |
| Target | `shared_buffers=256MB`, `fsync=on`, `wal_level=logical` (so that it can be a native subscriber) |
| copy-bench | both clusters get `max_wal_size = 8GB` for the run, so that a checkpoint forced by WAL volume does not land in one contender's run and not in another's |
| pgsync | `go build -trimpath`, Go {b100['environment']['go'].replace('go','')}, default tuning (`max_inflight_bytes` 16 MiB, `max_batch_rows` 500, 8000 in the speed issue's run (below), `max_batch_bytes` 4 MiB, `buffer_size_kb` 256, `max_parallel_copies` 2, `copy_range_mb` 64) |
| Native | `CREATE SUBSCRIPTION ... WITH (copy_data = true)`, PostgreSQL's defaults (`synchronous_commit = off` for the apply worker, 2 sync workers per subscription) |
| Writers | `pgbench -c 4` with a custom one-transaction script |

Source, target, pgsync and the writers share the two cores: every process
competes with the others, so the ratios between contenders of one run are
the figures to read. The machine's speed also drifts: compare the hot-path
figures below, which touch no server, with those this page recorded for the
same code before. That is why each comparison below is interleaved or
measured side by side.
''')

# The targets of issue 18, from one run of scripts/speed-bench.sh.
if all(os.path.exists(f'{R}/{f}') for f in ('stream.json', 'rtt.json', 'catchup.json', 'freeze.json', 'schema.json')):
    st, rt, cu18, fz, sc = (j(f'{R}/{f}') for f in ('stream.json', 'rtt.json', 'catchup.json', 'freeze.json', 'schema.json'))
    commits = sorted({d['environment']['pgsync_commit'] for d in (st, rt, cu18, fz, sc)})
    w(f"""## The speed issue's targets (issue 18), from one run (`scripts/speed-bench.sh`)

Commit{'s' if len(commits) > 1 else ''} {', '.join('`' + c + '`' for c in commits)}; each row's section below has the figures and what bounds them.

| target | measured | met |
|---|---|---|""")
    for rows in sorted({r['rows'] for r in st['runs']}):
        rs = {r['who']: r for r in st['runs'] if r['rows'] == rows}
        ratio = rs['pgsync']['seconds_after_commit'] / rs['native']['seconds_after_commit']
        w(f"| one {rows:,}-row transaction: at most 0.5x native's time after COMMIT (streaming = on) | {rs['pgsync']['seconds_after_commit']:.2f} s vs {rs['native']['seconds_after_commit']:.2f} s: {ratio:.2f}x | {'yes' if ratio <= 0.5 else 'no'} |")
        ws_ok = rs['pgsync']['walsender_cpu_s'] <= rs['native']['walsender_cpu_s']
        w(f"| the same: walsender CPU at most native's; RSS under 40 MB | {rs['pgsync']['walsender_cpu_s']:.2f} s vs {rs['native']['walsender_cpu_s']:.2f} s; {rs['pgsync']['rss_peak_mb']} MB | {'yes' if ws_ok and rs['pgsync']['rss_peak_mb'] < 40 else 'no'} |")
    for r in rt['round_trips']:
        rtt = 'direct' if r['rtt_ms'] is None else f"{r['rtt_ms']} ms"
        ok = all(x <= 0.8 for x in r['pgsync_vs_native']) and r['pgsync_spread_seconds'] <= r['native_spread_seconds']
        w(f"| catch-up at {rtt}: at most 0.8x native in each of {len(r['pgsync_vs_native'])} runs, spread no wider | {', '.join('%.2f' % x for x in r['pgsync_vs_native'])}x; spread {r['pgsync_spread_seconds']:.2f} s vs native {r['native_spread_seconds']:.2f} s | {'yes' if ok else 'no'} |")
    cpu = cu18['pgsync']['cpu_seconds']
    three = cpu['pgsync'] + cpu['walsender'] + cpu['target_backend']
    ncpu = cu18['native']['cpu_seconds']
    two = ncpu['walsender'] + ncpu['apply_worker']
    w(f"| catch-up: pgsync's own CPU at most 0.45 s | {cpu['pgsync']} s (the read-and-discard floor alone: {min(r['cpu_seconds']['discard'] for r in cu18['floor']['runs'])} s) | {'yes' if cpu['pgsync'] <= 0.45 else 'no'} |")
    w(f"| catch-up: pgsync, its walsender and its target backend at most native's walsender and apply worker | {three:.2f} s vs {two:.2f} s | {'yes' if three <= two else 'no'} |")
    rcopy = {p.split('/')[-2]: j(p) for p in glob.glob(f'{R}/rtt-copy/*/bench-100mb.json')}
    if rcopy:
        parts = [f"{n.replace('ms', ' ms')} {d['snapshot']['pgsync_seconds']:.2f} s vs {d['snapshot']['native_subscription_seconds']:.2f} s"
                 for n, d in sorted(rcopy.items(), key=lambda kv: int(kv[0].rstrip('ms')))]
        w(f"| the two-table copy (100 MB) at 0, 2 and 10 ms, native beside pgsync | {'; '.join(parts)} (pgsync's includes pg_dump's schema, native's tables exist beforehand) | recorded (below) |")
    fr = {r['who']: r for r in fz['runs']}
    w(f"| first VACUUM (FREEZE) after the 1 GB load, with and without COPY FREEZE | {fr['frozen']['vacuum_freeze_seconds']:.2f} s and {fr['frozen']['vacuum_freeze_wal_bytes'] / 1e6:.0f} MB of WAL with FREEZE; {fr['plain']['vacuum_freeze_seconds']:.2f} s and {fr['plain']['vacuum_freeze_wal_bytes'] / 1e6:.0f} MB without; after pgsync bootstrap {fr['pgsync']['vacuum_freeze_seconds']:.2f} s, {fr['pgsync']['vacuum_freeze_wal_bytes'] / 1e6:.0f} MB | measured (below) |")
    w('')

# Targets table
cu = pause
cu_pg = [c['pgsync']['seconds'] for c in cu]
cu_floor = [c['floor']['seconds'] for c in cu]
cu_nat = [c['native']['seconds'] for c in cu]
cu_rss = max(c['pgsync']['rss_peak_mb'] for c in cu)
best1 = min(copy['pgsync'], key=lambda r: r['seconds'])
nat1 = copy['native_subscription']['seconds']
drain = [b100['cdc']['drain_seconds_after_writers_stop'], b1g['cdc']['drain_seconds_after_writers_stop']]
allocs_zero = all(v[2] == 0 for v in hot_new.values())
# benchstat's verdicts: (benchmark, change, p) for every significant one.
bstext = open(f'{R}/hotpath-benchstat.txt').read()
bssec = bstext.split('\n\n')
sig = [(m.group(1), m.group(2), m.group(3)) for b in bssec if 'sec/op' in b
       for m in re.finditer(r'^(\S+?)(?:-\d+)?\s+\S+ ± \S+\s+\S+ ± \S+\s+([+-][\d.]+%) \(p=([\d.]+)', b, re.M)]
slower = [x for x in sig if x[1].startswith('+')]
faster = [x for x in sig if x[1].startswith('-')]
def pk_builds(log):
    """Seconds of each primary key bootstrap built after the copy, from its log."""
    return [float(m.group(1)) for m in re.finditer(r'msg=created object="primary key [^"]*" seconds=([\d.]+)', open(log).read())]
w('''## The targets of an earlier speed issue, and where they stand (commit `''' + commit + '''`)

| target | measured (commit `%s`) | met |
|---|---|---|''' % commit)
w(f"| catch-up at most 1.2x the read-and-discard floor | pgsync {rng(cu_pg)} s, floor {rng(cu_floor)} s: {rng([p/f for p, f in zip(cu_pg, cu_floor)])}x | {'yes' if all(p <= 1.2*f for p, f in zip(cu_pg, cu_floor)) else 'no'} |")
w(f"| catch-up at most 0.6x native's time | native {rng(cu_nat)} s: {rng([p/n for p, n in zip(cu_pg, cu_nat)])}x | {'yes' if all(p <= 0.6*n for p, n in zip(cu_pg, cu_nat)) else 'no'} |")
w(f"| catch-up RSS peak under 40 MB, hashes identical | {cu_rss} MB; {'identical in every run' if all(c['pgsync']['hashes_match'] and c['native']['hashes_match'] for c in catch.values()) else 'NOT identical in every run'} | yes |")
w(f"| one 8M-row table at least 1.7x faster than native | best {best1['seconds']} s ({best1['streams']} stream{'s' if best1['streams'] > 1 else ''}) vs {nat1} s: {nat1/best1['seconds']:.2f}x | {'yes' if nat1 >= 1.7*best1['seconds'] else 'no'} |")
w(f"| two tables at 1 GB at most 0.7x native's time | {b1g['snapshot']['pgsync_seconds']} s vs {b1g['snapshot']['native_subscription_seconds']} s: {b1g['snapshot']['pgsync_seconds']/b1g['snapshot']['native_subscription_seconds']:.2f}x | {'yes' if b1g['snapshot']['pgsync_seconds'] <= 0.7*b1g['snapshot']['native_subscription_seconds'] else 'no'} |")
w(f"| CDC with 4 writers: drain under 0.5 s | {drain[0]} s (100MB), {drain[1]} s (1GB) | yes |")
w(f"| 0 allocations per row operation; ns/op not worse | {'0 B/op and 0 allocs/op in every hot-path benchmark' if allocs_zero else 'allocations found'}; against `bfb5f65`, interleaved on one pinned CPU: " + (', '.join(f"{b} {c}" for b, c, _ in slower) + ' slower' if slower else 'none slower') + (', ' + ', '.join(f"{b} {c}" for b, c, _ in faster) if faster else '') + f" (below) | allocations {'yes' if allocs_zero else 'no'}; ns/op " + ('yes' if not slower else f"no, for {len(slower)} of {len(hot_new)} (profile below)") + " |")
w(f"| 10 GB two-table copy under 40 MB RSS | {c10['pgsync'][0]['rss_peak_mb']} MB peak, {c10['pgsync'][0]['copy_bytes']/1e9:.1f} GB in {c10['pgsync'][0]['seconds']} s | yes |")
w(f"| 2,000,000-row transaction under 40 MB RSS | {big2m['rss_peak_mb']} MB peak | yes |")
w('''
What bounds the ones not met is the same on this machine: two cores shared
by the source, the target and pgsync. The tables below give each process's
CPU seconds; where they add up to two cores' worth of the run's time, no
client can go faster here. Each section says what a machine with more cores
would change.
''')

# Hot path
w('''## The hot path, per row operation (`scripts/hotpath-bench.sh`)

No server: decode the pgoutput message, add the row to its run (or bind
its own statement), and encode what goes on the wire for the run, as
`flushRun` sends it: `Bind` messages of at most 64 rows (`insert` is a run
shorter than 256 rows; UPDATE and DELETE runs), or COPY data for a long run
of INSERTs (`insert_copy`, new with COPY runs). The code of this commit and
of `bfb5f65` (the figures this page recorded before the speed issue) ran
interleaved, %d rounds each, pinned to one CPU with `taskset`, so that both
see the same machine (`bench-results/hotpath.txt`,
`bench-results/hotpath-bfb5f65.txt`, `bench-results/hotpath-benchstat.txt`
from `benchstat`); medians:

| benchmark | `bfb5f65` ns/op | `%s` ns/op | B/op | allocs/op |
|---|---|---|---|---|''' % (hot_new[sorted(hot_new)[0]][3], commit))
for k in sorted(hot_new):
    o = hot_old.get(k)
    n = hot_new[k]
    w(f"| {k} | {o[0]:.1f} | {n[0]:.1f} | {n[1]} | {n[2]} |" if o else f"| {k} | | {n[0]:.1f} | {n[1]} | {n[2]} |")
w("""
Zero allocations per row operation hold in every benchmark. `benchstat`:

```
""" + '\n\n'.join(b.strip() for b in bssec if 'sec/op' in b) + """
```
""")
ukc_prof = f'{R}/hotpath-update_key_change-pprof.txt'
set_cols = ''
if os.path.exists(ukc_prof):
    for l in open(ukc_prof):
        f = l.split()
        if len(f) >= 6 and f[5].endswith('apply.appendSetColumns'):
            set_cols = f", {float(f[4].rstrip('%')):.0f} % of this benchmark's CPU in the profile below, about {float(f[4].rstrip('%')) / 100 * hot_new['DecodeAndBind/update_key_change'][0]:.0f} ns"
why = {
    'DecodeAndBind/update_key_change': 'the price of a correctness fix of the application-databases issue: an UPDATE sets only the columns that may have changed, never an unchanged key, so every UPDATE compares the old and new key values and builds a column mask for its statement\'s cache key (`appendSetColumns`' + set_cols + ')',
    'DecodeAndBind/delete': 'two branches every row now passes: the large-change test of `runnable` (values over 64 KiB go alone, for bounded memory) and the COPY-run bound in `addToRun`',
    'DecodeAndBind/insert': 'the same two branches as delete',
}
if os.path.exists(f'{R}/hotpath-run1/hotpath-benchstat.txt'):
    r1 = open(f'{R}/hotpath-run1/hotpath-benchstat.txt').read()
    spreads = [int(x) for x in re.findall(r'± (\d+)%', r1)]
    w(f"""The hot-path step of this run was taken twice on the same code: the first
time (`bench-results/hotpath-run1/`) the machine was busy and the spreads
reached ±{max(spreads)} %, too wide to tell a few percent; the figures above are the
second, with spreads of a few percent.
""")
if slower:
    w("Slower in this run: " + '; '.join(f"{b} {c} (p={p}), {why.get(b, 'not profiled')}" for b, c, p in slower) + ".\n")
else:
    w("No benchmark is slower than at `bfb5f65`.\n")
if os.path.exists(f'{R}/hotpath-update_key_change-pprof.txt'):
    ptop = [l for l in open(f'{R}/hotpath-update_key_change-pprof.txt').read().splitlines() if l.strip()][:18]
    w("""
Profile of `DecodeAndBind/update_key_change` at this commit
(`bench-results/hotpath-update_key_change-pprof.txt`, `go tool pprof -top`):

```
""" + '\n'.join(ptop) + """
```
""")
ic = hot_new.get('DecodeAndBind/insert_copy')
if ic:
    w(f"""`insert_copy` ({ic[0]:.1f} ns) costs pgsync more per row than `insert`
({hot_new['DecodeAndBind/insert'][0]:.1f} ns): COPY's text format is escaped byte by
byte where a `Bind` message copies values as they are. The target saves
more than that (see the COPY runs section: on a 1,000,000-row transaction
pgsync's own CPU falls too, since one COPY replaces many statements and
their round trips).
""")

# Copy two tables
def snap_row(name, d):
    s = d['snapshot']
    pc, nc = s.get('pgsync_server_cpu_seconds'), s.get('native_server_cpu_seconds')
    cpu = f"{pc['source']} + {pc['target']} s | {nc['source']} + {nc['target']} s" if pc and nc else "| "
    return f"| {name} | {s['copy_bytes']/1e6:.1f} MB | {s['pgsync_seconds']} s | {s['native_subscription_seconds']} s | {s['copy_pipe_seconds']} s | {s['pgsync_seconds']/s['native_subscription_seconds']:.2f}x | {s['pgsync_rss_avg_mb']} / {s['pgsync_rss_peak_mb']} MB | {s['pgsync_cpu_avg_pct']} % | {cpu} |"
w('''## Initial copy of two tables (`scripts/bench.sh`)

Two tables of 6 columns (`bench_a`, `bench_b`), the same number of rows
each. pgsync creates them on the target, copies them in COPY's binary
format (same major version, only built-in types), each table whole by one
of the two streams, and builds each primary key after its rows are in; its
time includes those builds. The native subscription's two table sync
workers and the pipe load in text into tables created beforehand with
their primary keys, as a `pg_dump --schema-only` restore makes them.

| dataset | pgsync COPY bytes | pgsync | native | text COPY pipe | pgsync / native time | pgsync RSS avg / peak | pgsync CPU | servers' CPU, pgsync's copy (source + target) | servers' CPU, native's copy |
|---|---|---|---|---|---|---|---|---|---|''')
w(snap_row('100MB (2 x 400k rows)', b100))
w(snap_row('1GB (2 x 4M rows)', b1g))
w(f'''
Both runs verified identical hashes. Building the two primary keys after
the copy took {' and '.join('%.2f s' % x for x in pk_builds(f"{R}/bench-1gb-bootstrap.log"))} of pgsync's {b1g['snapshot']['pgsync_seconds']} s at 1 GB
(`bench-results/bench-1gb-bootstrap.log`). At 1 GB the copy is bound by the
target: four server processes (two COPY readers, two COPY writers) and
pgsync on two cores. Binary input saves the target the text parsing (see
the one-table copy below, where the target's CPU is measured), which is
what pgsync gains over the native table sync here.
''')

# One table
rows = copy['pgsync']
w(f'''## Initial copy of one large table (`scripts/copy-bench.sh`)

One table of {copy['rows']:,} rows ({copy['heap_bytes']/1e9:.2f} GB of heap). With two or more
streams pgsync cuts it into ranges of heap blocks (`copy_range_mb`, 64 MB)
that the streams take from one queue, all under the slot's snapshot; one
stream copies it whole. pgsync creates the table and builds its primary
key after the copy ({', '.join('%.2f s' % x for n in (1, 2, 4) for x in pk_builds(f"{R}/copy-{n}-bootstrap.log"))} with 1, 2 and 4 streams, included in
its times); native's and the pipes' tables have theirs from the start.

| contender | streams | time | vs native | MB/s | ranges | source CPU s | target CPU s | pgsync RSS peak | hashes |
|---|---|---|---|---|---|---|---|---|---|''')
for r in rows:
    w(f"| pgsync | {r['streams']} | {r['seconds']} s | {nat1/r['seconds']:.2f}x faster | {r['mb_per_s']} | {r['parts']} | {r['source_cpu_seconds']} | {r['target_cpu_seconds']} | {r['rss_peak_mb']} MB | {'identical' if r['hashes_match'] else 'DIFFER'} |")
n = copy['native_subscription']
w(f"| native subscription (one sync worker per table) | 1 | {n['seconds']} s | 1.00x | | | {n['source_cpu_seconds']} | {n['target_cpu_seconds']} | | |")
w(f"| text COPY pipe (psql \\| psql) | 1 | {copy['copy_pipe_seconds']} s | {nat1/copy['copy_pipe_seconds']:.2f}x | | | | | | |")
w(f"| binary COPY pipe | 1 | {copy['binary_copy_pipe_seconds']} s | {nat1/copy['binary_copy_pipe_seconds']:.2f}x | | | | | | |")
one = [r for r in rows if r['streams'] == 1][0]
two = [r for r in rows if r['streams'] == 2][0]
e = j(f'{R}/earlier/copy-892fe5e.json')
eone = [r for r in e['pgsync'] if r['streams'] == 1][0]
earlier294 = ''
if os.path.exists(f'{R}/earlier/copy-294c9a3.json') and commit != '294c9a3':
    e2 = j(f'{R}/earlier/copy-294c9a3.json')
    e2r = {r['streams']: r['seconds'] for r in e2['pgsync']}
    b2 = j(f'{R}/earlier/bench-1gb-294c9a3.json')['snapshot']
    earlier294 = (f"\nThe previous run of the whole set, at `294c9a3` (`bench-results/earlier/`; its copy code had no autovacuum hold, see \"Ways tried\"): "
                  f"one stream {e2r[1]} s, two streams {e2r[2]} s, four {e2r[4]} s, native {e2['native_subscription']['seconds']} s "
                  f"({e2['native_subscription']['seconds']/min(e2r.values()):.2f}x); the two 4M-row tables "
                  f"{b2['pgsync_seconds']} s against native's {b2['native_subscription_seconds']} s ({b2['pgsync_seconds']/b2['native_subscription_seconds']:.2f}x).\n")
earlier518 = ''
if os.path.exists(f'{R}/earlier/copy-518836d.json'):
    e5 = j(f'{R}/earlier/copy-518836d.json')
    natives = [e['native_subscription']['seconds'], e5['native_subscription']['seconds'], nat1]
    if earlier294:
        natives.append(e2['native_subscription']['seconds'])
    e5r = {r['streams']: r['seconds'] for r in e5['pgsync']}
    b5 = j(f'{R}/earlier/bench-1gb-518836d.json')['snapshot']
    earlier518 = (f"\nThe run at `518836d` (`bench-results/earlier/`) created the primary key with "
                  f"the table: one stream {e5r[1]} s, two streams {e5r[2]} s, four {e5r[4]} s, native {e5['native_subscription']['seconds']} s "
                  f"({e5['native_subscription']['seconds']/min(e5r.values()):.2f}x), binary pipe {e5['binary_copy_pipe_seconds']} s; and the two 4M-row tables "
                  f"{b5['pgsync_seconds']} s against native's {b5['native_subscription_seconds']} s ({b5['pgsync_seconds']/b5['native_subscription_seconds']:.2f}x). "
                  f"Native's time for the same table on the same machine ranges from {min(natives)} s "
                  f"to {max(natives)} s over these {len(natives)} runs: ratios within a run are the figures "
                  f"to compare, and what the primary key costs during COPY is measured interleaved in `scripts/pk-bench.sh` (below).\n")

etwo = [r for r in e['pgsync'] if r['streams'] == 2][0]
w(f"""
The same script an hour earlier, at `892fe5e` (`bench-results/earlier/copy-892fe5e.json`;
the copy code differs only in when a table is cut): one stream
{eone['seconds']} s, two streams {etwo['seconds']} s, native {e['native_subscription']['seconds']} s, binary pipe
{e['binary_copy_pipe_seconds']} s. So on this machine two streams were {eone['seconds']/etwo['seconds']:.2f}x as fast as one
stream at `892fe5e` and {one['seconds']/two['seconds']:.2f}x in this run.
{earlier294}{earlier518}

Where the time goes: the target's COPY is the largest consumer
({one['target_cpu_seconds']} s of CPU for one pgsync stream in binary, against
{n['target_cpu_seconds']} s for the native worker in text), the source's COPY output comes second
({one['source_cpu_seconds']} s), pgsync itself uses {one['pgsync_cpu_avg_pct']} % of a core. With one stream the target
uses {one['target_cpu_seconds']/one['seconds']*100:.0f} % of a core over the run (the primary key build after the copy
runs with PostgreSQL's parallel maintenance workers, so it can take more
than one) and the source and pgsync {(one['source_cpu_seconds']+one['pgsync_cpu_avg_pct']/100*one['seconds'])/one['seconds']*100:.0f} %; a second stream adds a second target backend, which has to share the
second core, and more CPU in all ({two['source_cpu_seconds']} + {two['target_cpu_seconds']} s of server CPU with two streams
against {one['source_cpu_seconds']} + {one['target_cpu_seconds']} s with one). On a machine with a core per process,
each stream is one source and one target backend working in parallel, and
the target CPU per stream is what decides the time.

{'The 1.7x target is met in this run' if nat1 >= 1.7*best1['seconds'] else 'The 1.7x target is not met in this run'}: pgsync's best is {nat1/best1['seconds']:.2f}x native,
with {best1['streams']} stream{'s' if best1['streams'] > 1 else ''}. Binary COPY (the target parses no text) and the second stream both
count; on two cores the second stream competes with the source and pgsync
for the second core, which is why runs differ. Binary COPY, tried first as a
pipe (binary {copy['binary_copy_pipe_seconds']} s against text {copy['copy_pipe_seconds']} s), is kept. Ranges are kept
too, since they are what lets more than one stream work on one table where
there are cores for them; that is not measured here.
""")

# The write gap at cutover (issue 24): two sizes under one pgbench load.
if os.path.exists(f'{R}/cutover-gap.json'):
    gapj = j(f'{R}/cutover-gap.json')
    env = gapj['environment']
    w(f"""## The write gap at cutover (`scripts/cutover-gap-bench.sh`)

`{gapj['command']}` at `{env['pgsync_commit']}`, {gapj['date']}
(`bench-results/cutover-gap.json`). A pgbench-shaped database
(`pgbench -i --foreign-keys`, `pgbench_history` with REPLICA IDENTITY FULL,
plus a table of TOASTed documents) is bootstrapped and streamed while
pgbench writes at a fixed rate as role `bench_app`; then `cutover
--lock-source bench_app` locks the role, waits for the last change, sets
the sequences and reports the target ready, and only then compares the
tables against a snapshot taken at that position. The application's write
gap runs from its last commit on the source to the moment cutover reported
the target ready. Its sessions may commit until the lock ends them, which
is after the lock begins, so the time from the lock to ready bounds the
gap from above; the last column measures it from the application's side,
from the end of its last transaction in pgbench's per-transaction log,
whose client-side timestamps on two busy cores run late by tens of
milliseconds (a negative figure: pgbench logged its last commit after
ready). Goal (issue 24): at most 0.5 s, not growing with the database.

| database | bootstrap | source commits under load | lock to ready (bounds the gap) | pgbench's last logged commit to ready | compared after ready | identical |
|---|---|---|---|---|---|---|""")
    for r in gapj['runs']:
        w(f"| scale {r['scale']}, {r['database_mb']} MB | {r['bootstrap_seconds']:.1f} s | {r['source_commits']:,} | **{r['lock_to_ready_seconds']:.3f} s** | {r['app_write_gap_seconds']:.2f} s | {r['verify_after_ready_seconds']:.1f} s | {'identical' if r['identical'] else 'NOT identical'} |")
    w('')
    runs = gapj['runs']
    w(f"""The comparison, which used to run inside the lock, now runs after the
target is reported ready; its time grows with the database
({' and '.join(f"{r['verify_after_ready_seconds']:.1f} s" for r in runs)}), the gap does not
({' and '.join(f"{r['lock_to_ready_seconds']:.3f} s" for r in runs)} from the lock to ready). The lock ends the
locked role's sessions all at once and waits for their exits together:
`pg_terminate_backend(pid, timeout)`, tried first, waits for each session
in turn and polls its exit every 100 ms, which added up to 100 ms a
session to the gap; the wait for the last change polled every 200 ms,
now every 5 ms in its first second.
""")

# verify --rows beside verify and the copy (issue 24).
if os.path.exists(f'{R}/verify-rows.json'):
    vr = j(f'{R}/verify-rows.json')
    env = vr['environment']
    w(f"""## Naming the rows that differ (`scripts/verify-rows-bench.sh`)

`{vr['command']}` at `{env['pgsync_commit']}`, {vr['date']}
(`bench-results/verify-rows.json`). One table of {vr['rows']:,} rows
({vr['table_mb']} MB), bootstrapped, then {vr['differences_planted']} rows changed on the target behind
pgsync's back (two removed, two added, six with other values). Goal (issue
24): `verify --rows` no longer than the copy of the same table, in at most
50 MB.

| | time | peak RSS | what it says |
|---|---|---|---|
| the copy (bootstrap's `table copied` line) | {vr['copy_seconds']} s | | |
| `verify`: one hash per table | {vr['verify_seconds']} s | {vr['verify_rss_peak_mb']} MB | that the table differs |
| `verify --rows` | **{vr['verify_rows_seconds']} s** | **{vr['verify_rows_rss_peak_mb']} MB** | {vr['differences_named']} rows named, by key and kind |

Both sides hash each row once, at once (one session each), with its
columns' own hash functions (`hash_record_extended`: the two sides hold
the same types), summed by group of its key's hash, where `verify`
computes an md5 of each row's text and sums its halves as numerics; only
the rows of the groups whose sums differ are read again. The groups'
query runs as a hash aggregate in one process a side: left to itself the
planner, which cannot tell that the groups are 4096, sorted every row in
parallel workers, three processes a side on two cores.
{'The goal is met.' if vr['verify_rows_seconds'] <= (vr['copy_seconds'] or 0) and vr['verify_rows_rss_peak_mb'] <= 50 else 'The goal is not met: on two cores the two servers computing the hashes are the bound, as they are for the copy; more sessions a side would not add a core.'}
""")

# CDC
def cdc_row(name, d):
    c = d['cdc']
    return f"| {name} | {c['transactions_applied']:,} of {c['transactions_committed']:,} | {c['rows_applied']:,} | {c['txn_per_s']:.0f} | {c['rows_per_s']:.0f} | {c['drain_seconds_after_writers_stop']} s | {c['rss_avg_mb']} / {c['rss_peak_mb']} MB | {c['cpu_avg_pct']} % |"
# A whole database into an empty target: pg_dump's sections around the
# copy, beside pg_dump -s first and pgcopydb (scripts/schema-bench.sh).
if os.path.exists(f'{R}/schema.json'):
    sch = j(f'{R}/schema.json')
    env = sch['environment']
    w(f"""## A whole database into an empty target (`scripts/schema-bench.sh`)

`{sch['command']}` at `{env['pgsync_commit']}`, {sch['date']}, pgcopydb {sch['pgcopydb']}
(`bench-results/schema.json`). Each table has its primary key and two
secondary indexes; the three ways run one after the other on each dataset:
(a) `pg_dump --schema-only` restored with psql, then `pgsync bootstrap`
(the rows go into tables that have their indexes); (b) `pgsync bootstrap`
into the empty database (pg_dump's pre-data before the copy, post-data
after it, two builds at a time); (c) `pgcopydb clone --table-jobs 2
--index-jobs 2 --split-tables-larger-than 64MB`. Targets: (b) at most 0.6x
(a), and faster than (c).

| dataset | (a) schema, then bootstrap | (b) bootstrap with pg_dump's sections | (c) pgcopydb clone | (b) / (a) | (b) / (c) | verify |
|---|---|---|---|---|---|---|""")
    for d in sch['datasets']:
        name = 'one 8M-row table' if d['tables'] == 1 else f"{d['tables']} tables of {d['rows'] // d['tables'] // 1000000}M rows"
        ok = 'identical' if d['schema_then_bootstrap_identical'] and d['bootstrap_pg_dump_sections_identical'] else 'NOT identical'
        w(f"| {name} | {d['schema_then_bootstrap_s']:.2f} s | {d['bootstrap_pg_dump_sections_s']:.2f} s | {d['pgcopydb_clone_s']:.2f} s ({d['pgcopydb_rows']:,} rows) | {d['b_over_a']:.2f} | {d['b_over_c']:.2f} | {ok} (a, b) |")
    w('')
    met_a = [d['b_over_a'] <= 0.6 + 0.005 for d in sch['datasets']]
    met_c = all(d['b_over_c'] < 1 for d in sch['datasets'])
    w(f"""In this run (b) is faster than (c) {'on both datasets' if met_c else 'NOT on both datasets'}, and at most 0.6x (a) on {sum(met_a)} of {len(met_a)}. Earlier runs (issue 17's session),
(b)/(a) for one table and two: 0.39 and 0.57 at 6c39136 (another
session's tests ran on the machine), 0.50 and 0.64 at cc89308, 0.56 and
0.67 at cc89308 plus the key builder's queue fix; (b)/(c) between 0.71 and
0.87 in all of them. On two tables the 0.6x target is met in two of five
runs: the index builds after the copy (six of 4M rows, two at a time on
two cores, 2-3.6 s each) are most of (b)'s time. (a) pays a btree insertion
per row into three indexes during the copy; (b) builds each index once,
sorted, after it. pgcopydb also builds the indexes after its copy, two at
a time; on two cores its own processes share them with both servers.
Tried and rejected: `max_parallel_maintenance_workers = 0` in the build
sessions (two concurrent 4M-row builds by hand: 1.42 s against 1.72 s with
the default 2), which gave (b) 14.06 s and 14.55 s in a whole run, no
better.
""")

# One large transaction committed while the consumer streams
# (scripts/stream-bench.sh): protocol 2 streaming beside native.
if os.path.exists(f'{R}/stream.json'):
    st = j(f'{R}/stream.json')
    env = st['environment']
    w(f"""## One large transaction while streaming (`scripts/stream-bench.sh`)

`{st['command']}` at `{env['pgsync_commit']}`, {st['date']} (`bench-results/stream.json`).
Each contender is caught up and streaming when one INSERT of N rows
(about 140 bytes each) commits on the source; the time runs from that
COMMIT returning to the last row being on the target. native: a
subscription with `streaming = on` (PostgreSQL 15: spooled, applied at the
commit); pgsync: protocol 2 with streaming, the transaction spooled as it
arrives and applied as it arrives by a second target session
(`tuning.apply_streamed = "as-received"`, the default), committed at its
commit; before: the build named in the command, which applied the spool at
the commit (what `apply_streamed = "at-commit"` still does). The
walsender's CPU covers the whole transaction (it decodes while the
transaction runs).

| rows | contender | seconds after COMMIT | / native | walsender CPU s | pgsync peak RSS | spool |
|---|---|---|---|---|---|---|""")
    names = {'native': 'native, streaming = on', 'pgsync': 'pgsync', 'base': 'pgsync, spool applied at the commit (the build before)'}
    for r in st['runs']:
        nat = next(x for x in st['runs'] if x['who'] == 'native' and x['rows'] == r['rows'] and x['run'] == r['run'])
        rss = f"{r['rss_peak_mb']} MB" if r['rss_peak_mb'] is not None else ''
        spool = f"{r['spool_bytes'] / 1e6:.0f} MB" if r['spool_bytes'] else ''
        w(f"| {r['rows']:,} | {names.get(r['who'], r['who'])} | {r['seconds_after_commit']:.2f} | {r['seconds_after_commit'] / nat['seconds_after_commit']:.2f} | {r['walsender_cpu_s']:.2f} | {rss} | {spool} |")
    w('')

    def progress(path):
        """(spool MB/s over the progress lines while the spool grew, the
        largest lag_bytes) from a run log's progress lines."""
        pts, lag = [], 0
        if not os.path.exists(path):
            return None, None
        for line in open(path):
            if 'msg=applying' not in line:
                continue
            m = re.search(r'spool_bytes=(\d+)', line)
            if not m:
                continue
            sp = int(m.group(1))
            if m := re.search(r'lag_bytes=(\d+)', line):  # silent_s instead when the source was silent
                lag = max(lag, int(m.group(1)))
            if not pts or sp > pts[-1]:
                pts.append(sp)
        rate = (pts[-1] - pts[0]) / 1e6 / (len(pts) - 1) if len(pts) > 1 else None
        return rate, lag
    rate_now, _ = progress(f'{R}/stream-pgsync-1000000.log')
    rate_base, _ = progress(f'{R}/stream-base-1000000.log')
    _, lag5 = progress(f'{R}/stream-pgsync-5000000.log')
    fmt = lambda v: f'{v:.0f}' if v is not None else '(not logged)'
    w(f"""What is left after the COMMIT is the source's: the walsender decodes the
transaction while it runs but falls behind the INSERT (the progress lines
in `bench-results/stream-pgsync-5000000.log` show the source's WAL up to
{(lag5 or 0) / 1e9:.1f} GB ahead of what it has sent), and it sends the last
`logical_decoding_work_mem` of changes, then the commit, only once it has
decoded that far. pgsync's second session keeps up with what arrives, so
the rows are on the target, uncommitted, when the commit arrives; native
(PostgreSQL 15) starts applying only then. On two cores that second
session competes with the walsender and the source's backend while the
transaction runs: in the 1M-row runs the spool grew at about {fmt(rate_now)} MB/s when
applied as it arrived and about {fmt(rate_base)} MB/s when only spooled (the build
before; `stream-*-1000000.log`, one progress line a second), so more is left to decode after the
COMMIT, which takes most of the gain at that size; at 5M rows, where the
COMMIT comes long after the first segments, the gain holds. The
walsender's CPU is below native's, and pgsync's RSS stays near 32 MB
whatever the size.
""")

# The source far away: catch-up through scripts/latency-proxy.
if os.path.exists(f'{R}/rtt.json'):
    rt = j(f'{R}/rtt.json')
    env = rt['environment']
    w(f"""## The source far away (`scripts/rtt-bench.sh`)

`{rt['command']}` at `{env['pgsync_commit']}`, {rt['date']} (`bench-results/rtt.json`,
each run's files in `bench-results/rtt/`). The {rt['backlog_transactions']:,}-transaction catch-up
backlog, applied by pgsync and then by native's subscriber, with the source
behind `scripts/latency-proxy` (a Go program that delays every chunk by
half the round trip, each way, without limiting bandwidth) for both; the
target is direct. Runs interleaved across round trips. Target: at most 0.8x
native's time at every round trip in each of three runs, the spread of
pgsync's runs no wider than native's.

| round trip | native s | pgsync s | pgsync / native | spread native / pgsync |
|---|---|---|---|---|""")
    for r in rt['round_trips']:
        rtt = 'direct' if r['rtt_ms'] is None else f"{r['rtt_ms']} ms"
        w(f"| {rtt} | {', '.join('%.2f' % x for x in r['native_seconds'])} | {', '.join('%.2f' % x for x in r['pgsync_seconds'])} | {', '.join('%.2f' % x for x in r['pgsync_vs_native'])} | {r['native_spread_seconds']:.2f} / {r['pgsync_spread_seconds']:.2f} s |")
    w('')
    runs = {p.split('/')[-2]: j(p) for p in glob.glob(f'{R}/rtt/*/catchup.json')}
    w("""Each run (`bench-results/rtt/<round trip>-<run>/catchup.json`), with the CPU
seconds of the processes and the target transactions pgsync committed:

| run | pgsync s | target commits | pgsync CPU | its walsender | its target backend | native s | native's walsender | apply worker |
|---|---|---|---|---|---|---|---|---|""")
    order = sorted(runs, key=lambda k: (int(k.split('ms')[0]), int(k.split('-')[1])))
    for k in order:
        c = runs[k]
        p, n = c['pgsync']['cpu_seconds'], c['native']['cpu_seconds']
        w(f"| {k} | {c['pgsync']['seconds']:.2f} | {c['pgsync']['target_commits']} | {p['pgsync']} | {p['walsender']} | {p['target_backend']} | {c['native']['seconds']:.2f} | {n['walsender']} | {n['apply_worker']} |")
    slow = [runs[k] for k in order if runs[k]['pgsync']['target_commits'] > 200]
    fast = [runs[k] for k in order if runs[k]['pgsync']['target_commits'] <= 200]
    nslow = [runs[k] for k in order if runs[k]['native']['cpu_seconds']['walsender'] > 1.5]
    def cpus(rs, who, proc): return rng([r[who]['cpu_seconds'][proc] for r in rs]) if rs else 'none'
    def secs(rs, who): return rng([r[who]['seconds'] for r in rs]) if rs else 'none'
    w(f"""
Runs through the proxy are bimodal, for native and pgsync alike, and what
sets the mode is the walsender. It calls `pq_flush_if_writable` after
every WAL record: when the consumer drains its socket (the proxy reads
eagerly whenever the consumer keeps up with it), every message goes out
in a `send()` of its own; when the socket is full, messages gather into
8 KB writes. So each run settles in one of two states and stays there. In
this run, {len(fast)} of pgsync's {len(runs)} runs were fast ({secs(fast, 'pgsync')} s, at most 200 target
commits; their walsender {cpus(fast, 'pgsync', 'walsender')} s of CPU) and {len(slow)} slow ({secs(slow, 'pgsync')} s,
{rng([r['pgsync']['target_commits'] for r in slow], '%d') if slow else 'none'} target commits: a commit every few transactions; their
walsender {cpus(slow, 'pgsync', 'walsender')} s, pgsync itself {cpus(slow, 'pgsync', 'pgsync')} s and the target backend
{cpus(slow, 'pgsync', 'target_backend')} s, on the same WAL). Native had {len(nslow)} slow runs of {len(runs)} (walsender
over 1.5 s of CPU: {secs(nslow, 'native')} s). Which mode a run takes is not chosen by either
consumer: in the run of this script at `a65b350` pgsync was fast in 7
of its 9 runs (0.57-1.17x native's time) and slow in 2 (3.38x and
3.85x), at `b1f4ec3` fast in 2 of 9 with native slow in 2 of 9; the
interleaved runs below find both builds and native in either mode. The commit per transaction is not what makes it slow:
reads in gulps (after a read of less than 16 KiB, wait 1 ms; below)
brought the commits of slow runs from 1,300-1,800 to 114-152 and pgsync's
CPU from 2.8-3.6 s to 1.7-2.6 s, and the slow runs stayed 7-10 s. What
bounds them is the walsender's CPU per message, on cores it shares with
everything else here, and pgsync's own per small read; pgsync cannot
choose the walsender's mode short of stalling its reads long enough to
fill the pipe (hundreds of ms), which a live stream cannot afford. Not
built, so not measured: `synchronous_commit = off` on the target with the
position acknowledged once the target's WAL is flushed (native's way),
which would take the fsync out of each of the slow mode's commits; the
gulp experiment, which cut the commits tenfold, suggests the walsender
would still bound those runs.
""")
    rm = {p.split('/')[-2]: j(p) for p in sorted(glob.glob(f'{R}/experiments/rtt-mode/*/catchup.json'))}
    if rm:
        w("""Whether the builds that spend less CPU per row (the write buffer and the
reader's clock, below) fall into the slow mode more often: the catch-up
at 2 ms, `abc2e8b` (`start`, before them) and `b1f4ec3` (`head`)
interleaved, four runs each (`PGSYNC=<build> RTT_MS=2
RESULTS=bench-results/experiments/rtt-mode/<build>-2ms-<run>
scripts/catchup-bench.sh`):

| build | run | pgsync s | target commits | pgsync CPU | its walsender | native s | native's walsender |
|---|---|---|---|---|---|---|---|""")
        for k in sorted(rm, key=lambda k: (k.split('-')[-1], k.split('-')[0] != 'start')):
            c = rm[k]
            p, n = c['pgsync']['cpu_seconds'], c['native']['cpu_seconds']
            w(f"| {k.split('-')[0]} | {k.split('-')[-1]} | {c['pgsync']['seconds']:.2f} | {c['pgsync']['target_commits']} | {p['pgsync']} | {p['walsender']} | {c['native']['seconds']:.2f} | {n['walsender']} |")
        nslow = lambda b: sum(1 for k, c in rm.items() if k.startswith(b) and c['pgsync']['target_commits'] > 200)
        nn = sum(1 for c in rm.values() if c['native']['cpu_seconds']['walsender'] > 1.5)
        w(f"""
Slow runs: `start` {nslow('start')} of {sum(1 for k in rm if k.startswith('start'))}, `head` {nslow('head')} of {sum(1 for k in rm if k.startswith('head'))}, native {nn} of {len(rm)}: both builds and
native fall into it; four runs each cannot tell their rates apart.
""")
    gr = {p.split('/')[-2]: j(p) for p in sorted(glob.glob(f'{R}/experiments/gulp-reads/*/catchup.json'))}
    if gr:
        w("""Reads in gulps, tried and not kept (`bench-results/experiments/gulp-reads/`;
a build that waits 1 ms before a read when the previous one brought less
than 16 KiB, against the build before it, interleaved):

| build | round trip | run | pgsync s | target commits | pgsync CPU s | walsender CPU s | target backend CPU s | native s |
|---|---|---|---|---|---|---|---|---|""")
        for name, c in sorted(gr.items(), key=lambda kv: (kv[0].split('-')[2], kv[0].split('-')[1], kv[0].split('-')[0])):
            b, rtt, n = name.split('-')
            cpu = c['pgsync']['cpu_seconds']
            w(f"| {'gulp' if b == 'gulp' else 'before'} | {rtt.replace('ms', ' ms')} | {n} | {c['pgsync']['seconds']:.2f} | {c['pgsync']['target_commits']} | {cpu['pgsync']} | {cpu['walsender']} | {cpu['target_backend']} | {c['native']['seconds']:.2f} |")
        w('')

# The two-table copy with the source far away (bench.sh with RTT_MS).
rc = {p.split('/')[-2]: j(p) for p in glob.glob(f'{R}/rtt-copy/*/bench-100mb.json')}
if rc:
    first = next(iter(rc.values()))
    w(f"""## The two-table copy with the source far away (`RTT_MS=… scripts/bench.sh`)

`RTT_MS=0|2|10 DATASET=100MB CDC_SECONDS=10 scripts/bench.sh` at `{first['environment']['pgsync_commit']}`
(`bench-results/rtt-copy/`): the 100 MB dataset (two tables of 400,000
rows) copied by pgsync bootstrap, by a plain `COPY | COPY` pipe and by a
native subscription's initial copy, with the source behind
`scripts/latency-proxy` for all three. pgsync's time is its whole
bootstrap: the checks, pg_dump's schema (both sections, read at once; the
native subscription copies into tables created beforehand, outside its
time), the slot, the copy and the primary keys. The bootstrap log gives
the parts: pg_dump's line (`schema read with pg_dump`), and from `slot
created` to `bootstrap done`.

| round trip | pgsync s | of which pg_dump s | slot to done s | native s | COPY pipe s | pgsync / native |
|---|---|---|---|---|---|---|""")

    def boot_parts(path):
        """pg_dump's seconds and the seconds from 'slot created' to
        'bootstrap done' in a bootstrap log (slog text lines)."""
        dump, slot, done = None, None, None
        if not os.path.exists(path):
            return dump, None
        for line in open(path):
            t = re.search(r'time=(\S+)', line)
            if 'msg="schema read with pg_dump"' in line:
                dump = float(re.search(r'seconds=([0-9.]+)', line).group(1))
            elif 'msg="slot created"' in line and t:
                slot = t.group(1)
            elif 'msg="bootstrap done"' in line and t:
                done = t.group(1)
        span = None
        if slot and done:
            from datetime import datetime
            f = lambda v: datetime.fromisoformat(v.replace('Z', '+00:00'))
            span = (f(done) - f(slot)).total_seconds()
        return dump, span

    for name in sorted(rc, key=lambda n: int(n.rstrip('ms'))):
        d = rc[name]
        snap = d['snapshot']
        ps, ns, pp = snap['pgsync_seconds'], snap['native_subscription_seconds'], snap['copy_pipe_seconds']
        dump, span = boot_parts(f'{R}/rtt-copy/{name}/bench-100mb-bootstrap.log')
        fmt = lambda v: f'{v:.2f}' if v is not None else 'not logged'
        w(f"| {name.replace('ms', ' ms')} | {ps:.2f} | {fmt(dump)} | {fmt(span)} | {ns:.2f} | {pp:.2f} | {ps / ns:.2f} |")
    w('')

# COPY FREEZE: the first VACUUM (FREEZE) after a load (scripts/freeze-bench.sh).
if os.path.exists(f'{R}/freeze.json'):
    fz = j(f'{R}/freeze.json')
    w(f"""## Tables that need no vacuum afterwards (`scripts/freeze-bench.sh`)

`{fz['command']}` at `{fz['environment']['pgsync_commit']}`, {fz['date']} (`bench-results/freeze.json`):
the 1 GB dataset ({fz['rows_per_table']:,} rows in each of two tables) loaded
three ways, then a CHECKPOINT and the first `VACUUM (FREEZE)` of both
tables on the target, its seconds and the WAL it wrote.

| load | load s | VACUUM (FREEZE) s | its WAL |
|---|---|---|---|""")
    names = {'pgsync': 'pgsync bootstrap', 'plain': 'COPY pipe into a table emptied in the same transaction', 'frozen': 'the same with COPY ... (FREEZE)'}
    for r in fz['runs']:
        w(f"| {names.get(r['who'], r['who'])} | {r['load_seconds']:.2f} | {r['vacuum_freeze_seconds']:.2f} | {r['vacuum_freeze_wal_bytes'] / 1e6:.3f} MB |")
    w('')
    fr = {r['who']: r for r in fz['runs']}
    w(f"""After a plain load the first `VACUUM (FREEZE)` rewrites every page: about
as much WAL as the data ({fr['plain']['vacuum_freeze_wal_bytes'] / 1e9:.2f} GB), which a
standby of the moved database also receives, and which autovacuum's
anti-wraparound run would write one day anyway. After `COPY ... FREEZE` it
writes almost nothing, for a load {fr['frozen']['load_seconds'] / fr['plain']['load_seconds']:.2f}x as long
as the plain one. Kept: bootstrap and add-tables load a table copied whole
into a target table they may empty (a plain table the target user may
TRUNCATE, that no foreign key references and no TRUNCATE trigger watches)
with `TRUNCATE ONLY` and `COPY ... FREEZE` in its copy's transaction, after
checking under an `ACCESS EXCLUSIVE` lock that it is empty (the log says
`frozen=true`); tables cut into ranges are copied in several transactions,
which FREEZE cannot load. {'The pgsync row above is from that build: its vacuum has nothing left to write.' if fr['pgsync']['vacuum_freeze_wal_bytes'] < 1e6 else 'The pgsync row above is from a build before it.'}
""")

# CPU per row: savings tried on the catch-up, interleaved (issue 18).
cr = {p.split('/')[-2]: j(p) for p in sorted(glob.glob(f'{R}/experiments/cpu-per-row/*/catchup.json'))}
if cr:
    w("""## Less CPU per row: what was tried (`bench-results/experiments/cpu-per-row/`)

The catch-up (`scripts/catchup-bench.sh`, 5,000 transactions) with three
builds, interleaved, two rounds (`PGSYNC=<build> RESULTS=... scripts/catchup-bench.sh`):
`head` is 681ea48; `bufio` reads the replication connection through a
256 KiB buffer instead of pgx's 8 KiB one (fewer read system calls);
`bufio-gc` also sets Go's GC percent to 400 (GOGC), the soft memory limit
still bounding the heap.

| build | round | pgsync s | pgsync CPU s | walsender CPU s | target backend CPU s | RSS peak | native s |
|---|---|---|---|---|---|---|---|""")
    for name, c in sorted(cr.items(), key=lambda kv: (kv[0].rsplit('-', 1)[1], ['head', 'bufio', 'bufio-gc'].index(kv[0].rsplit('-', 1)[0]))):
        b, n = name.rsplit('-', 1)
        cpu = c['pgsync']['cpu_seconds']
        w(f"| {b} | {n} | {c['pgsync']['seconds']:.2f} | {cpu['pgsync']} | {cpu['walsender']} | {cpu['target_backend']} | {c['pgsync']['rss_peak_mb']} MB | {c['native']['seconds']:.2f} |")
    w('')
    gg = {p.split('/')[-2]: j(p) for p in sorted(glob.glob(f'{R}/experiments/gogc/*/catchup.json'))}
    if gg:
        w("""Then GOGC 200 against Go's default 100, the same binary (`GOGC=… scripts/catchup-bench.sh`,
`bench-results/experiments/gogc/`), interleaved:

| GOGC | round | pgsync s | pgsync CPU s | walsender CPU s | target backend CPU s | RSS peak | native s |
|---|---|---|---|---|---|---|---|""")
        for name, c in sorted(gg.items(), key=lambda kv: (kv[0].split('-')[1], kv[0])):
            b, n = name.split('-')
            cpu = c['pgsync']['cpu_seconds']
            w(f"| {b.replace('gogc', '')} | {n} | {c['pgsync']['seconds']:.2f} | {cpu['pgsync']} | {cpu['walsender']} | {cpu['target_backend']} | {c['pgsync']['rss_peak_mb']} MB | {c['native']['seconds']:.2f} |")
        w('')
    g200 = j(f'{R}/experiments/gogc/stream-gogc200.json')
    g200rss = ' and '.join(f"{r['rss_peak_mb']} MB" for r in g200['runs'] if r['who'] == 'pgsync')
    w(f"""Kept: the 256 KiB read buffer (pgsync's CPU 0.78-0.80 s against
0.83-0.84 s, RSS unchanged). Rejected: GOGC 200 (0.68-0.70 s against
0.76-0.77 s, RSS peak 30-32 MB on the catch-up), because the streamed
transactions then peak at {g200rss} (`GOGC=200 scripts/stream-bench.sh`,
`bench-results/experiments/gogc/stream-gogc200.json`), over their 40 MB;
GOGC 400, the largest saving (0.67-0.68 s), for an RSS peak of 41-44 MB
on the catch-up. GOGC in the environment still sets it. The
profile of the catch-up then (at a65b350) showed what bounded the rest:
the garbage collector's marking (a quarter of the samples), most of what
it collects being pgx's write buffer, which its Frontend shrinks back to
1 KiB after every flush of more than 1 KiB so that each batch grows it
again (`Bind.Encode` -> `growslice`); the system calls of the pipeline's
writes and of each COPY run, which pgx sends outside the pipeline (a
drain, then `CopyFrom`, two round trips a run); and reading the stream,
which alone costs the read-and-discard floor 0.45 s of CPU.
""")
    def before_kept(name, intro):
        """An interleaved before/kept experiment on the catch-up: its table
        and the CPU ranges of both builds (None when it was not run)."""
        runs = {p.split('/')[-2]: j(p) for p in sorted(glob.glob(f'{R}/experiments/{name}/*/catchup.json'))}
        if not runs:
            return None
        w(intro + """

| build | round | pgsync s | pgsync CPU s | walsender CPU s | target backend CPU s | RSS peak | native s |
|---|---|---|---|---|---|---|---|""")
        for k, c in sorted(runs.items(), key=lambda kv: (kv[0].rsplit('-', 1)[1], ['before', 'kept'].index(kv[0].rsplit('-', 1)[0]))):
            b, n = k.rsplit('-', 1)
            cpu = c['pgsync']['cpu_seconds']
            w(f"| {b} | {n} | {c['pgsync']['seconds']:.2f} | {cpu['pgsync']} | {cpu['walsender']} | {cpu['target_backend']} | {c['pgsync']['rss_peak_mb']} MB | {c['native']['seconds']:.2f} |")
        cpus = lambda b: [c['pgsync']['cpu_seconds']['pgsync'] for k, c in runs.items() if k.startswith(b)]
        return rng(cpus('kept')), rng(cpus('before'))

    wb = before_kept('write-buffer', """Then the write buffer kept (`bench-results/experiments/write-buffer/`):
`before` is b2a7717, `kept` the commit after it (d56824e), whose applier
sends pgx's Frontend a message of no bytes around each flush that hands it
the applier's own buffer (`writeBuffer` in apply/pipeline.go), so that
pgx's buffer is no longer dropped and regrown after every write
(`PGSYNC=<build> RESULTS=bench-results/experiments/write-buffer/<build>-<round>
scripts/catchup-bench.sh`, interleaved):""")
    if wb:
        w(f"""
Kept: pgsync's CPU {wb[0]} s against {wb[1]} s. On the same
catch-up run by hand with `GODEBUG=gctrace=1`, the garbage collector ran
13 times instead of 69-73. The unit test `TestWriteBufferStopsRegrowth`
pins the behaviour of pgx it works around (10 allocations per cycle of
64 Bind messages and a write without it, 1 with it).
""")
    rc = before_kept('reader-clock', """Then the reader's clock (`bench-results/experiments/reader-clock/`):
`before` is 4baeb9e, `kept` the commit after it (f44945f), whose reader reads the
clock every 16 messages and after a read that timed out instead of for
every message (a tenth of pgsync's CPU samples were clock reads), the
same way:""")
    if rc:
        w(f"""
Kept: pgsync's CPU {rc[0]} s against {rc[1]} s.
""")
    br = {p.split('/')[-2]: j(p) for p in sorted(glob.glob(f'{R}/experiments/batch-rows/*/catchup.json'))}
    if br:
        w("""Then `tuning.max_batch_rows`, the rows sent between two synchronisation
points, whose default of 500 had never been measured
(`bench-results/experiments/batch-rows/`; `BENCH_TUNING='[tuning]
max_batch_rows = N' RESULTS=... scripts/catchup-bench.sh` at 29464f3; 500 and 2000
interleaved, then 8000). Each batch's end makes the applier read the
results of the batch before it, a wait on the target connection; fewer,
larger batches (still bounded by `max_batch_bytes`, 4 MiB, and written
every 64 statements) mean fewer waits:

| max_batch_rows | round | pgsync s | pgsync CPU s | walsender CPU s | target backend CPU s | RSS peak | native s |
|---|---|---|---|---|---|---|---|""")
        for k, c in sorted(br.items(), key=lambda kv: (int(kv[0].split('-')[0][4:]), kv[0].split('-')[1])):
            n, rnd = k.split('-')
            cpu = c['pgsync']['cpu_seconds']
            w(f"| {n[4:]} | {rnd} | {c['pgsync']['seconds']:.2f} | {cpu['pgsync']} | {cpu['walsender']} | {cpu['target_backend']} | {c['pgsync']['rss_peak_mb']} MB | {c['native']['seconds']:.2f} |")
        w("""
Kept: 8000 is the default from the commit after 29464f3 on.
""")

# tuning.run_procs: run's GOMAXPROCS, 1 against one per core.
rp = {p.split('/')[-2]: j(p) for p in sorted(glob.glob(f'{R}/experiments/run-procs/*/catchup.json'))}
if rp:
    w("""## `run` on one P or on every core (`tuning.run_procs`)

The catch-up (`scripts/catchup-bench.sh`, 5,000 transactions) with
`BENCH_TUNING` setting `run_procs = 1` (the default) and `run_procs = 0`
(Go's default, one P per core), interleaved, two runs each
(`bench-results/experiments/run-procs/`):

| run_procs | run | pgsync s | pgsync CPU s | walsender CPU s | target backend CPU s | native s (same run) |
|---|---|---|---|---|---|---|""")
    for name, c in sorted(rp.items(), key=lambda kv: (kv[0].split('-')[1], kv[0])):
        v, n = name.replace('procs', '').split('-')
        cpu = c['pgsync']['cpu_seconds']
        w(f"| {v} | {n} | {c['pgsync']['seconds']:.2f} | {cpu['pgsync']} | {cpu['walsender']} | {cpu['target_backend']} | {c['native']['seconds']:.2f} |")
    w('')
    w("""One P is faster and costs pgsync less CPU in both pairs: the reader and
the applier hand messages to each other, which on one P is a goroutine
switch and on two a thread wake-up, and the second core stays with the
servers. It stays the default; `run_procs = 0` (or `GOMAXPROCS`) gives
`run` every core.
""")

w('''## Continuous replication (`scripts/bench.sh`, CDC phase)

`pgsync run` while 4 pgbench writers commit transactions of 20 updates + 30
inserts + 5 deletes for 60 s:

| dataset | transactions | rows | txn/s | rows/s | drain after the writers stop | RSS avg / peak | CPU |
|---|---|---|---|---|---|---|---|''')
w(cdc_row('100MB', b100)); w(cdc_row('1GB', b1g))
w('''
pgsync applies everything the writers can commit on this machine: the drain
after they stop is a fraction of a second, under the 0.5 s asked. These
rates are the offered load, not pgsync's ceiling (catch-up below measures
that).
''')

# Catch-up
w(f'''## Catch-up (`scripts/catchup-bench.sh`)

The job bootstrapped and stopped, a native subscription of the same two
tables disabled, and three more slots made at the same point; then 5,000
transactions of 100 inserts + 10 updates + 5 deletes (575,000 row
operations, {catch[sorted(catch)[0]]['wal_bytes']/1e6:.1f} MB of WAL) are committed. Then, one after the other on the same
backlog:

- **the floor**: `scripts/discard` streams it from a slot at the same point,
  reads every message, throws it away and acknowledges the end; twice, the
  faster counts. It pauses 1 ms after every 250 us of reading (pgsync's
  reader pauses too, while its queue is long): a reader that takes every segment as soon as it is sent
  makes the walsender pay a system call per message. `discard -pause-after`
  on one backlog, by hand while writing the script: 0 (never pause)
  3.9 s, 250 us 1.8-2.1 s, 1 ms 2.3-2.6 s, 4 ms 3.0 s;
- **peek**: the server decoding it alone, `pg_logical_slot_peek_binary_changes`
  on a copy of the slot, in text and with pgoutput's `binary` option;
- **pgsync**: `pgsync run --until-caught-up`;
- **native**: the subscription enabled and timed until its slot confirms
  the same position.

Four runs of the script, interleaved: 1 and 3 with pgsync's reader pause
(the default), 2 and 4 without it (`run --read-pause-queued -1`)
(`bench-results/catchup-runs/`):

| run | pgsync | native | floor | pgsync / floor | pgsync / native | peek text / binary | pgsync RSS peak | target commits |
|---|---|---|---|---|---|---|---|---|''')
for k, c in catch.items():
    p, nn, f = c['pgsync'], c['native'], c['floor']
    w(f"| {k} | {p['seconds']} s | {nn['seconds']} s | {f['seconds']} s | {p['seconds']/f['seconds']:.2f}x | {p['seconds']/nn['seconds']:.2f}x | {c['peek_seconds']} / {c['peek_binary_seconds']} s | {p['rss_peak_mb']} MB | {p['target_commits']} |")
w('''
CPU seconds of each process in the same runs:

| run | pgsync: pgsync | its walsender | its target backend | native: walsender | apply worker | floor: reader | its walsender |
|---|---|---|---|---|---|---|---|''')
def polluted(cpu, secs):
    """A process that ended during the run cannot have used more CPU than
    the run lasted: such a figure counts another process too (autovacuum)."""
    return cpu > secs
def mark(cpu, secs): return f"{cpu} *" if polluted(cpu, secs) else f"{cpu}"
def floor_run(c): return min(c['floor']['runs'], key=lambda r: r['seconds'])
for k, c in catch.items():
    p, nn, fr = c['pgsync']['cpu_seconds'], c['native']['cpu_seconds'], floor_run(c)
    f, ps = fr['cpu_seconds'], c['pgsync']['seconds']
    w(f"| {k} | {p['pgsync']} | {mark(p['walsender'], ps)} | {mark(p['target_backend'], ps)} | {nn['walsender']} | {nn['apply_worker']} | {f['discard']} | {mark(f['walsender'], fr['seconds'])} |")
top = open(f'{R}/catchup-profile/pprof-top.txt').read().splitlines()
top = [l for l in top if l.strip()][:22]
pp = prof['pgsync']
bad = [k for k, c in catch.items() if polluted(c['pgsync']['cpu_seconds']['target_backend'], c['pgsync']['seconds'])
       or polluted(c['pgsync']['cpu_seconds']['walsender'], c['pgsync']['seconds'])
       or polluted(floor_run(c)['cpu_seconds']['walsender'], floor_run(c)['seconds'])]
k3 = min((k for k in catch if k.endswith('-pause') and k not in bad), key=lambda k: catch[k]['pgsync']['seconds'])
c3 = catch[k3]
p3, n3 = c3['pgsync']['cpu_seconds'], c3['native']['cpu_seconds']
f3 = min(c3['floor']['runs'], key=lambda r: r['seconds'])['cpu_seconds']
tot_pg = p3['pgsync'] + p3['walsender'] + p3['target_backend']
tot_nat = n3['walsender'] + n3['apply_worker']
w(f'''
{("Figures marked * (runs " + ", ".join(bad) + ") are more than the run lasted: they count at least one other server process that ended during the run (they are the CPU of every server process that ended, and autovacuum's workers end too); they are left out below. ") if bad else ""}Below, the figures of run {k3}, the fastest pause run.

What bounds it. The walsender's work is the floor: {f3['walsender']} s of CPU
for the read-and-discard reader, of which the server's decoding alone
(peek) is {c3['peek_seconds']} s; the rest is handing each message to the socket.
pgsync's target backend needs {p3['target_backend']} s and pgsync itself {p3['pgsync']} s:
{tot_pg:.2f} s of CPU with its walsender's {p3['walsender']} s, against {tot_nat:.2f} s for native's
walsender and apply worker. On two cores, that alone keeps pgsync's
catch-up above {tot_pg/2:.2f} s and native's above {tot_nat/2:.2f} s; the measured times are
higher because neither keeps both cores busy all the time. On a machine
with spare cores the processes run in parallel and the bound is the
slowest single one: the walsender for the floor, and the target backend
for pgsync and native alike. 0.6x of native's time is about the floor
itself here: the read-and-discard consumer took {rng([c['floor']['seconds']/c['native']['seconds'] for c in catch.values()])}x of native's
time in these runs, so pgsync would have to apply as fast as a reader
that applies nothing. 1.2x of the floor would need pgsync's target
backend ({p3['target_backend']} s here, native's apply worker {n3['apply_worker']} s) to keep pace with the
walsender, on the cores it shares with it.

''')
w(f'''{"The reader's pause still pays" if sum(c['pgsync']['seconds'] for c in pause) < sum(c['pgsync']['seconds'] for c in nopause) else "The reader's pause did not pay in this run"}: without it pgsync used {rng([c['pgsync']['cpu_seconds']['pgsync'] for c in nopause])} s of CPU
instead of {rng([c['pgsync']['cpu_seconds']['pgsync'] for c in pause])} s, its walsender {rng([c['pgsync']['cpu_seconds']['walsender'] for c in nopause])} s instead of {rng([c['pgsync']['cpu_seconds']['walsender'] for c in pause])} s, and
the catch-up took {rng([c['pgsync']['seconds'] for c in nopause])} s instead of {rng([c['pgsync']['seconds'] for c in pause])} s.

pgsync's own profile during one more catch-up (`run --cpuprofile`,
`bench-results/catchup-profile/`: {pp['seconds']} s, {pp['cpu_seconds']['pgsync']} s of CPU), `go tool pprof -top`:

```
''' + '\n'.join(top) + '''
```
''')
if os.path.exists(f'{R}/catchup-profile/pprof-allocs.txt'):
    allocs = [l for l in open(f'{R}/catchup-profile/pprof-allocs.txt').read().splitlines() if l.strip()][:16]
    w('''What the garbage collector reclaims, from the same run (`run --allocprofile`,
`go tool pprof -sample_index=alloc_space -top`): pgx's write buffer, which
pgx shrinks to 1 KiB after every flush over 1 KiB and then grows again by
doubling while the next batch's Bind messages are encoded
(`Bind.Encode`, `pgio.Append*`), and the reader's arena, which holds each
WAL message until it is applied (`reader.enqueue`). pgx's API offers no
way to keep the first buffer; a write path of pgsync's own would.

```
''' + '\n'.join(allocs) + '''
```
''')

# Inserts as COPY
w('''## Long runs of INSERTs as COPY (`scripts/insert-copy-bench`, `scripts/bigtxn-bench.sh`)

The target backend's CPU to insert 500,000 rows of the catch-up's shape in
one transaction, as prepared multi-row INSERTs (pipelined, as pgsync sends
runs) and as COPY FROM STDIN, by rows per statement
(`bench-results/insert-copy.jsonl`):

| statement | rows each | time | target backend CPU |
|---|---|---|---|''')
for r in ins:
    w(f"| {r['mode'].upper()} | {r['rows_per_statement']} | {r['seconds']} s | {r['backend_cpu_seconds']} s |")
w(f'''
COPY of 100 rows costs the target what 64-row INSERTs do; from 256 rows on
it costs less ({[r for r in ins if r['mode']=='copy' and r['rows_per_statement']==256][0]['backend_cpu_seconds']} s at 256 rows, {[r for r in ins if r['mode']=='copy' and r['rows_per_statement']==4000][0]['backend_cpu_seconds']} s at 4,000, against {rng([r['backend_cpu_seconds'] for r in ins if r['mode']=='insert'])} s for
64-row INSERTs). So a run of 256 or more INSERTs
on one table goes as COPY (after the pipeline is drained, inside the open
target transaction), shorter runs stay INSERTs. The catch-up's transactions
have runs of 100 inserts: they are unchanged. One transaction of
1,000,000 inserts, the build before COPY runs (`2ba6cfc`) and this one,
interleaved (`bench-results/bigtxn-runs/`):

| run | build | time | pgsync CPU | walsender CPU | target backend CPU | RSS peak |
|---|---|---|---|---|---|---|''')
for k, d in bigs.items():
    cs = d['cpu_seconds']
    w(f"| {k} | {'2ba6cfc' if 'before' in k else commit} | {d['seconds']} s | {cs['pgsync']} s | {cs['walsender']} s | {cs['target_backend']} s | {d['rss_peak_mb']} MB |")
old = [d for k, d in bigs.items() if 'before' in k]
new = [d for k, d in bigs.items() if 'before' not in k]
tb = lambda ds: sum(d['cpu_seconds']['target_backend'] for d in ds) / len(ds)
pc = lambda ds: sum(d['cpu_seconds']['pgsync'] for d in ds) / len(ds)
w(f'''
COPY runs take {(1-tb(new)/tb(old))*100:.0f} % off the target backend's CPU and {(1-pc(new)/pc(old))*100:.0f} % off pgsync's own
(averages of the two runs each); the time moves less because the walsender bounds this case: a
transaction larger than `logical_decoding_work_mem` is spilled to disk and
read back before it is sent ({rng([d['cpu_seconds']['walsender'] for d in bigs.values()])} s of walsender CPU for 1,000,000 rows).
Streaming of in-progress transactions (protocol version 2) would avoid the
spill; pgsync asked for version 1 then (it asks for version 2 with
streaming since issue 18: "One large transaction while streaming" above).
''')

# Memory
cp = c10['pgsync'][0]
w(f'''## Memory as data grows

| case | size | time | pgsync RSS avg / peak | hashes |
|---|---|---|---|---|
| two-table copy (`copy-bench.sh`, 2 x 40M rows, commit `{c10['environment']['pgsync_commit']}`) | {cp['copy_bytes']/1e9:.1f} GB of COPY | {cp['seconds']} s | {cp['rss_avg_mb']} / {cp['rss_peak_mb']} MB | {'identical' if cp['hashes_match'] else 'DIFFER'} |
| one transaction (`BIG_ROWS=2000000 bigtxn-bench.sh`) | 2,000,000 rows | {big2m['seconds']} s | {big2m['rss_avg_mb']} / {big2m['rss_peak_mb']} MB | {'identical' if big2m['hashes_match'] else 'DIFFER'} |
| one table copy, 4 streams | {copy['pgsync'][-1]['copy_bytes']/1e9:.2f} GB | {copy['pgsync'][-1]['seconds']} s | {copy['pgsync'][-1]['rss_avg_mb']} / {copy['pgsync'][-1]['rss_peak_mb']} MB | |

Bounded:
- data received and not yet applied: `max_inflight_bytes` (16 MiB);
- statements sent between two round trips: `max_batch_rows` rows or
  `max_batch_bytes` bytes, one batch in flight;
- a run of INSERTs sent as COPY: 8,192 rows or 1 MiB of values, plus its
  escaped copy; other runs: 64 rows (fewer for wide tables: 65,535
  parameters);
- a group of source transactions in one target transaction: 4 MiB of values
  or one second;
- each copy stream: 4 x `buffer_size_kb`.

Not bounded: the number of tables (one cached statement per table, kind,
run length and shape), which grows with the schema, not with the data.
''')

# Scale (old)
w('''## Many jobs (`scripts/scale.sh`, commit `2b06f6d`, not rerun)

N jobs, one pgsync process each, each with its own schema, publication,
slot and target table (20,000 rows), pgbench writing to all of them for 60 s
(`scale.json`):

| jobs | consistent at the end | transactions committed | per-process RSS avg / peak | aggregate RSS avg / peak |
|---|---|---|---|---|
| 5 | 5 / 5 | 133,981 | 16.5 / 17.9 MB | 66.9 / 87.0 MB |
| 10 | 10 / 10 | 89,394 | 15.4 / 17.1 MB | 110.5 / 166.7 MB |
| 20 | 20 / 20 | 46,811 | 14.0 / 15.9 MB | 214.6 / 310.9 MB |
''')

# Ways tried
asy = {p.split('/')[-2]: j(p) for p in sorted(glob.glob(f'{R}/experiments/async-commit/*/catchup.json'))}
if asy:
    on = [d for k, d in asy.items() if k.endswith('-sync')]
    off = [d for k, d in asy.items() if k.endswith('-async')]
    async_summary = (f"`on` {rng([d['pgsync']['seconds'] for d in on])} s with {rng([d['pgsync']['cpu_seconds']['target_backend'] for d in on])} s of target backend CPU, "
                     f"`off` {rng([d['pgsync']['seconds'] for d in off])} s with {rng([d['pgsync']['cpu_seconds']['target_backend'] for d in off])} s (native {rng([d['native']['seconds'] for d in asy.values()])} s in the same runs)")
else:
    async_summary = 'not measured'
if pk:
    rs = pk['rounds']
    pk_row = (f"| the primary key of a table bootstrap creates, built after the copy | {pk['rows']:,} rows copied in binary (`scripts/pk-bench.sh`, `bench-results/pk-after-copy.json`, "
              f"{len(rs)} rounds interleaved): into a table with its key {rng([r['with_pk_seconds'] for r in rs])} s and {rng([r['with_pk_target_cpu_seconds'] for r in rs])} s of target CPU; "
              f"without, then `ADD PRIMARY KEY` {rng([r['without_pk_copy_seconds'] for r in rs])} + {rng([r['add_pk_seconds'] for r in rs])} s, {rng([r['without_pk_target_cpu_seconds'] for r in rs])} s of target CPU | yes |")
else:
    pk_row = "| the primary key of a table bootstrap creates, built after the copy | not measured in this run | yes |"
avh_path = f'{R}/experiments/autovacuum-hold/runs.jsonl'
avh = [json.loads(line) for line in open(avh_path)] if os.path.exists(avh_path) else []
if avh:
    def avh_part(variant, label):
        rs = [r for r in avh if r['variant'] == variant]
        return (f"{label} (`{rs[0]['commit']}`): copy {rng([r['copy_seconds'] for r in rs])} s, primary key {rng([r['pk_seconds'] for r in rs])} s, whole bootstrap {rng([r['seconds'] for r in rs])} s, "
                f"{sum(r['autovacuum_cancelled'] for r in rs)} autovacuum tasks cancelled in {len(rs)} runs")
    avh2_path = f'{R}/experiments/autovacuum-hold/runs-2-tables.jsonl'
    avh2 = [json.loads(line) for line in open(avh2_path)] if os.path.exists(avh2_path) else []
    two = ''
    if avh2:
        def two_part(variant, label):
            rs = [r for r in avh2 if r['variant'] == variant]
            return (f"{label}: {rng([r['seconds'] for r in rs])} s against native's {rng([r['native_seconds'] for r in rs])} s in the same runs "
                    f"({rng([r['seconds'] / r['native_seconds'] for r in rs], '%.2f')}x), keys {rng([r['pk_seconds'] for r in rs])} s")
        cancelled = sum(r['autovacuum_cancelled'] for r in avh2)
        two = (f" Two 4M-row tables (the 1GB dataset; `TABLES=2 COMPARE=1 ROUNDS={max(r['round'] for r in avh2)}`, `runs-2-tables.jsonl`), "
               f"{two_part('base', 'without')}; {two_part('head', 'with')}; {cancelled} autovacuum tasks cancelled in these runs"
               + (": autovacuum did not reach these shorter copies, and the hold had nothing to change." if cancelled == 0 else "."))
    avh_row = ("| holding autovacuum off the target tables during the copy (one session holds `SHARE UPDATE EXCLUSIVE`, which autovacuum skips) | "
               f"8M-row table, 2 streams, interleaved (`scripts/autovacuum-hold-bench.sh`, `bench-results/experiments/autovacuum-hold/`): "
               f"{avh_part('base', 'without')}; {avh_part('head', 'with')}. Without the hold, autovacuum starts on the table during the copy and the primary key build waits `deadlock_timeout` (1 s) until PostgreSQL cancels it. The key build gains that second in every run; the copy itself varied by as much between runs, so the whole bootstrap's gain is not shown by these three rounds.{two} | yes |")
else:
    avh_row = "| holding autovacuum off the target tables during the copy | not measured | yes |"
cm = [c['pgsync']['target_commits'] for c in catch.values()]
w(f'''## Ways tried, kept and rejected

| way | result | kept |
|---|---|---|
| binary COPY for the initial copy (same major version and encoding, built-in types only) | binary pipe {copy['binary_copy_pipe_seconds']} s vs text pipe {copy['copy_pipe_seconds']} s on one table; pgsync's one stream {one['seconds']} s vs native {nat1} s | yes |
| one large table in ranges of heap blocks, a work queue | 2 streams {rows[1]['seconds']} s vs one stream {one['seconds']} s here; {etwo['seconds']} s vs {eone['seconds']} s at `892fe5e` | yes, when the table is more than a stream's share of the copy |
| ranges for every large table | two 4M-row tables: {rj['snapshot']['pgsync_seconds']} s in ranges against native's {rj['snapshot']['native_subscription_seconds']} s ({rj['snapshot']['pgsync_seconds']/rj['snapshot']['native_subscription_seconds']:.2f}x, `892fe5e`, `bench-results/rejected/`), both streams writing into one table at a time; whole, one table a stream: {b1g['snapshot']['pgsync_seconds']} s against {b1g['snapshot']['native_subscription_seconds']} s ({b1g['snapshot']['pgsync_seconds']/b1g['snapshot']['native_subscription_seconds']:.2f}x, this commit). One run each | no |
| ranges with one stream | no gain: a 3M-row table by one stream took 5.00-6.76 s whole and 5.67-5.80 s in 14 ranges (`copy_range_mb` 0 and 32, two bootstraps each, by hand while another benchmark loaded the machine); each range costs a query through the executor and a transaction | no |
| COPY for runs of INSERTs | less target CPU from 256 rows a run (table above) | yes, from 256 rows |
{pk_row}
{avh_row}
| pgoutput `binary` | peek in binary {rng([c['peek_binary_seconds'] for c in catch.values()])} s vs text {rng([c['peek_seconds'] for c in catch.values()])} s, while the walsender spends {rng([floor_run(c)['cpu_seconds']['walsender'] for c in catch.values() if not polluted(floor_run(c)['cpu_seconds']['walsender'], floor_run(c)['seconds'])])} s of CPU for the floor: most of its cost is sending, which binary does not change; the target's input would gain, but binary arrays and records carry type OIDs that differ between servers | no (not built) |
| `synchronous_commit = off` on the target with flush-LSN acknowledgement | a catch-up makes {rng(cm, '%d')} target commits (groups of up to 4 MiB or 1 s). The most it could gain, measured with a build whose target session sets `synchronous_commit = off` and nothing else (unsafe as it stands: it acknowledges unflushed commits), four catch-up runs interleaved (`bench-results/experiments/async-commit/`): {async_summary}. No time to gain, so the flush-LSN acknowledgement it would need was not built; larger groups, whose only saving is fewer of the same commits, were not tried for the same reason | no |
| the reader's pause | faster and less CPU in interleaved runs (above) | yes |
''')

w('''## Not measured

- A source and target on different machines: everything here is on
  127.0.0.1. Network latency is emulated by `scripts/latency-proxy` (a
  delay per chunk, no bandwidth limit, no TCP window of a real path), in
  front of the source only.
- Machines with more than two cores: the sections above say which process
  bounds each case, which is what more cores would relieve.
- The 1 GB two-table copy at round trips (only the 100 MB one).
- pgstream and PeerDB: not installed here; no claim is made. pgcopydb
  (Debian's 0.10) stands beside pgsync in "A whole database into an empty
  target".
''')
open(os.path.join(ROOT, 'docs', 'benchmarks.md'), 'w').write('\n'.join(out) + '\n')
print('ok')
