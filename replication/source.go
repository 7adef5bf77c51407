// Package replication owns the source side of a job: the checks that the
// source can replicate, the publication and the logical slot, the pgoutput
// stream and the feedback that lets the source release WAL.
package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/killpoint"
	"github.com/pgsync/pgsync/periodic"
)

// SourceSettings are the source settings and rights replication needs.
type SourceSettings struct {
	Version string
	// Major is the source's major version (server_version_num / 10000):
	// PostgreSQL 12 lacks max_slot_wal_keep_size.
	Major                   int
	WALLevel                string
	MaxSlots, UsedSlots     int
	MaxSenders, UsedSenders int
	CanReplicate            bool // REPLICATION or superuser
	User                    string
	// MaxSlotWALKeepSizeMB is -1 when unlimited, and on PostgreSQL 12,
	// which has no such limit.
	MaxSlotWALKeepSizeMB int64
}

// ReadSourceSettings reads what pgsync check (and so bootstrap) judges.
func ReadSourceSettings(ctx context.Context, conn *pgx.Conn) (SourceSettings, error) {
	var s SourceSettings
	// max_slot_wal_keep_size is read from pg_settings, not current_setting,
	// so that PostgreSQL 12, which lacks it, answers NULL rather than an
	// error in its log.
	var keep *int64
	err := conn.QueryRow(ctx, `
SELECT current_setting('server_version'), current_setting('server_version_num')::int / 10000, current_setting('wal_level'),
       current_setting('max_replication_slots')::int,
       (SELECT count(*) FROM pg_replication_slots)::int,
       current_setting('max_wal_senders')::int,
       (SELECT count(*) FROM pg_stat_replication)::int,
       (SELECT rolsuper OR rolreplication FROM pg_roles WHERE rolname = current_user), current_user::text,
       (SELECT setting::bigint FROM pg_settings WHERE name = 'max_slot_wal_keep_size')`).
		Scan(&s.Version, &s.Major, &s.WALLevel, &s.MaxSlots, &s.UsedSlots, &s.MaxSenders, &s.UsedSenders, &s.CanReplicate, &s.User, &keep)
	if err != nil {
		return s, fmt.Errorf("check source settings: %w", err)
	}
	s.MaxSlotWALKeepSizeMB = -1
	if keep != nil {
		s.MaxSlotWALKeepSizeMB = *keep
	}
	return s, nil
}

// Names holds the source-side names of a job.
type Names struct {
	Job         string
	Slot        string // pgsync_<job>
	Publication string // pgsync_<job>
}

// CreatePublication creates the job's publication for exactly tables.
func CreatePublication(ctx context.Context, conn *pgx.Conn, n Names, tables []catalog.Table) error {
	sql := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s", catalog.QuoteIdent(n.Publication), tableList(tables))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("create publication %s: %w", n.Publication, err)
	}
	return nil
}

// PublishedTables returns the tables of the job's publication, sorted,
// but pgsync's own: pgsync.ddl, published for the DDL capture's table
// path (package ddl), is none of the job's tables.
func PublishedTables(ctx context.Context, conn *pgx.Conn, publication string) ([]catalog.TableName, error) {
	rows, err := conn.Query(ctx, `SELECT schemaname::text, tablename::text FROM pg_publication_tables
WHERE pubname = $1 AND schemaname <> 'pgsync' ORDER BY 1, 2`, publication)
	if err != nil {
		return nil, fmt.Errorf("list tables of publication %s: %w", publication, err)
	}
	var out []catalog.TableName
	for rows.Next() {
		var n catalog.TableName
		if err := rows.Scan(&n.Schema, &n.Name); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Slot is a freshly created logical slot whose exported snapshot stays
// valid for as long as Conn is open and idle.
type Slot struct {
	Conn            *pgconn.PgConn
	SnapshotName    string
	ConsistentPoint pglogrepl.LSN
}

// CreateSlot creates the job's pgoutput slot on the replication connection
// conn and exports its snapshot. The caller must keep conn open, doing
// nothing else, until every copy has imported the snapshot.
func CreateSlot(ctx context.Context, conn *pgconn.PgConn, n Names) (*Slot, error) {
	return createSlot(ctx, conn, n.Slot, false)
}

func createSlot(ctx context.Context, conn *pgconn.PgConn, name string, temporary bool) (*Slot, error) {
	// A standby reports in_hot_standby (14+), and refuses a failover slot:
	// only a primary's slots are synchronized to standbys.
	failover := ServerMajor(conn) >= FailoverSlotsMajor && !temporary && conn.ParameterStatus("in_hot_standby") != "on"
	res, err := pglogrepl.ParseCreateReplicationSlot(conn.Exec(ctx, createSlotSQL(name, temporary, failover)))
	if err != nil {
		return nil, fmt.Errorf("create replication slot %s: %w", name, err)
	}
	killpoint.Done(ctx, "CREATE_REPLICATION_SLOT "+name)
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return nil, fmt.Errorf("create replication slot %s: consistent point %q: %w", name, res.ConsistentPoint, err)
	}
	return &Slot{Conn: conn, SnapshotName: res.SnapshotName, ConsistentPoint: lsn}, nil
}

// FailoverSlotsMajor is the first major whose logical slots can be
// failover slots: created with FAILOVER true, a standby with
// sync_replication_slots = on keeps a copy of the slot, and the walsender
// sends nothing a standby listed in synchronized_standby_slots has not
// received, so after a promotion the job continues from the new primary.
const FailoverSlotsMajor = 17

// createSlotSQL is the CREATE_REPLICATION_SLOT command of a pgoutput slot
// with an exported snapshot, a failover slot when failover is set (a
// permanent slot on a primary with failover slots: the server refuses
// one that is temporary, which lasts one connection anyway, and one on a
// standby). pglogrepl's CreateReplicationSlot writes the old syntax
// (EXPORT_SNAPSHOT as a keyword), which has no place for FAILOVER, so
// the option-list form (PostgreSQL 15+) is written here; other slots keep
// the old syntax, which every supported major knows.
func createSlotSQL(name string, temporary, failover bool) string {
	tmp := ""
	if temporary {
		tmp = " TEMPORARY"
	}
	if failover {
		return "CREATE_REPLICATION_SLOT " + catalog.QuoteIdent(name) + " LOGICAL pgoutput (SNAPSHOT 'export', FAILOVER true)"
	}
	return "CREATE_REPLICATION_SLOT " + name + tmp + " LOGICAL pgoutput EXPORT_SNAPSHOT"
}

// CreateTemporarySlot creates a temporary logical slot named name with an
// exported snapshot on conn (a replication connection): the slot, and so
// its consistent point's meaning, lasts as long as conn. add-tables copies
// under it.
func CreateTemporarySlot(ctx context.Context, conn *pgconn.PgConn, name string) (*Slot, error) {
	return createSlot(ctx, conn, name, true)
}

// AddToPublication adds tables to the job's publication.
func AddToPublication(ctx context.Context, conn *pgx.Conn, n Names, tables []catalog.Table) error {
	list := tableList(tables)
	sql := fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", catalog.QuoteIdent(n.Publication), list)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("add %s to publication %s: %w", list, n.Publication, err)
	}
	return nil
}

// DropFromPublication takes tables out of the job's publication: the
// source stops sending their changes from the next transaction.
func DropFromPublication(ctx context.Context, conn *pgx.Conn, n Names, tables []catalog.Table) error {
	list := tableList(tables)
	sql := fmt.Sprintf("ALTER PUBLICATION %s DROP TABLE %s", catalog.QuoteIdent(n.Publication), list)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("drop %s from publication %s: %w", list, n.Publication, err)
	}
	return nil
}

// tableList is tables as a comma-separated list of quoted names.
func tableList(tables []catalog.Table) string { return strings.Join(catalog.Idents(tables), ", ") }

// Exists reports whether the job's slot or publication exist on the source.
func Exists(ctx context.Context, conn *pgx.Conn, n Names) (slot, publication bool, err error) {
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1),
       EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $2)`, n.Slot, n.Publication).Scan(&slot, &publication)
	if err != nil {
		return false, false, fmt.Errorf("look up slot %s: %w", n.Slot, err)
	}
	return slot, publication, nil
}

// Slot errors, worded for the operator by the commands that meet them.
var (
	// ErrSlotActive: another process (a walsender serving another pgsync
	// run) streams from the job's slot.
	ErrSlotActive = errors.New("slot is in use")
	// ErrSlotMissing: the job's slot does not exist on the source.
	ErrSlotMissing = errors.New("slot does not exist")
	// ErrSlotInvalidated: the source removed WAL the slot still needed
	// (max_slot_wal_keep_size); the job must start over.
	ErrSlotInvalidated = errors.New("slot is invalidated")
)

// slotReleaseWait bounds how long a reconnecting session waits for the
// walsender of its previous connection to release the slot.
const slotReleaseWait = 60 * time.Second

// startReleaseWait bounds the same wait at a first start: the walsender of
// a run that has just ended (killed, or run --until-caught-up) may hold the
// slot a moment longer than its process lived; another run that streams
// keeps it, and the start is refused once this has passed.
const startReleaseWait = 2 * time.Second

// awaitSlot checks, on the replication connection before streaming, that
// the job's slot exists, is usable and is not in use. At the first start a
// slot still active after startReleaseWait is an error: another pgsync runs
// the job. When reconnecting, the walsender of the lost connection may
// still hold it for a while; awaitSlot waits for it up to slotReleaseWait.
func awaitSlot(ctx context.Context, conn *pgconn.PgConn, n Names, reconnecting bool, log *slog.Logger) error {
	walStatus := "coalesce(wal_status, '')"
	if ServerMajor(conn) < 13 { // no wal_status: a slot of 12 is never invalidated
		walStatus = "''"
	}
	sql := "SELECT coalesce(active_pid, 0)::text, " + walStatus + " FROM pg_replication_slots WHERE slot_name = " + catalog.QuoteLiteral(n.Slot)
	deadline := time.Now().Add(startReleaseWait)
	if reconnecting {
		deadline = time.Now().Add(slotReleaseWait)
	}
	var pid string // the walsender that holds the slot at the last look
	released := func(ctx context.Context) (bool, error) {
		rows, err := conn.Exec(ctx, sql).ReadAll()
		if err != nil {
			return false, fmt.Errorf("look up slot %s: %w", n.Slot, err)
		}
		if len(rows) != 1 || len(rows[0].Rows) != 1 {
			return false, fmt.Errorf("slot %s of job %s: %w", n.Slot, n.Job, ErrSlotMissing)
		}
		row := rows[0].Rows[0]
		var walStatus string
		pid, walStatus = string(row[0]), string(row[1])
		if walStatus == "lost" {
			return false, fmt.Errorf("slot %s of job %s: %w: the source removed WAL it still needed (max_slot_wal_keep_size)", n.Slot, n.Job, ErrSlotInvalidated)
		}
		if pid == "0" {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("job %s: %w: walsender PID %s on the source streams from slot %s", n.Job, ErrSlotActive, pid, n.Slot)
		}
		return false, nil
	}
	say := func(waited time.Duration) {
		if log != nil {
			log.Info("waiting for the source to release the slot: the walsender of the lost connection still holds it; pg_terminate_backend(pid) on the source ends the wait, run gives up after "+slotReleaseWait.String(),
				"slot", n.Slot, "walsender_pid", pid, "waited_s", fmt.Sprintf("%.0f", waited.Seconds()))
		}
	}
	return periodic.Await(ctx, periodic.Wait{Poll: 500 * time.Millisecond, SayAfter: 5 * time.Second, SayEvery: 10 * time.Second}, released, say)
}

// slotError describes a failed START_REPLICATION by its SQLSTATE.
func slotError(n Names, start pglogrepl.LSN, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "55006": // object_in_use: taken between awaitSlot and now
			return fmt.Errorf("job %s: %w: %s", n.Job, ErrSlotActive, pgErr.Message)
		case "42704": // undefined_object
			return fmt.Errorf("slot %s of job %s: %w", n.Slot, n.Job, ErrSlotMissing)
		}
	}
	return fmt.Errorf("start replication on slot %s at %s: %w", n.Slot, start, err)
}

// Drop removes the job's slot and publication; missing ones are fine.
func Drop(ctx context.Context, conn *pgx.Conn, n Names) error {
	if err := DropSlot(ctx, conn, n); err != nil {
		return err
	}
	return DropPublication(ctx, conn, n)
}

// DropSlot removes the job's slot unless it is missing; an active one is
// ErrSlotActive. On a standby source the slot is the standby's and the
// publication the primary's: Drop's two halves run on each.
func DropSlot(ctx context.Context, conn *pgx.Conn, n Names) error {
	var active bool
	var pid *int32
	err := conn.QueryRow(ctx, `SELECT active, active_pid FROM pg_replication_slots WHERE slot_name = $1`, n.Slot).Scan(&active, &pid)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("look up slot %s: %w", n.Slot, err)
	case active:
		p := int32(0)
		if pid != nil {
			p = *pid
		}
		return fmt.Errorf("drop slot %s: %w by process %d (stop pgsync run first)", n.Slot, ErrSlotActive, p)
	default:
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, n.Slot); err != nil {
			return fmt.Errorf("drop slot %s: %w", n.Slot, err)
		}
	}
	return nil
}

// DropPublication removes the job's publication unless it is missing.
func DropPublication(ctx context.Context, conn *pgx.Conn, n Names) error {
	if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+catalog.QuoteIdent(n.Publication)); err != nil {
		return fmt.Errorf("drop publication %s: %w", n.Publication, err)
	}
	return nil
}

// SlotStatus is what the source knows about a job's slot.
type SlotStatus struct {
	Exists            bool
	Active            bool
	ConfirmedFlushLSN pglogrepl.LSN
	RestartLSN        pglogrepl.LSN
	CurrentWALLSN     pglogrepl.LSN
	// WALStatus is pg_replication_slots.wal_status: "lost" means the slot
	// was invalidated and the job must start over.
	WALStatus string
	// SafeWALSize is pg_replication_slots.safe_wal_size: how much more WAL
	// can be written before the slot is invalidated, in bytes (nil: no limit).
	SafeWALSize *int64
	// MaxSlotWALKeepSizeBytes is the source's max_slot_wal_keep_size in bytes,
	// -1 when unlimited.
	MaxSlotWALKeepSizeBytes int64
	// SourceNow is the source's clock, for lag in seconds.
	SourceNow time.Time
}

// headLSN is the source's WAL position in SQL: on a standby source, where
// pg_current_wal_lsn() is refused, the position it has replayed, which
// is as far as its walsenders decode.
const headLSN = "CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END"

// Status reads the slot's state and the source's current WAL position.
func Status(ctx context.Context, conn *pgx.Conn, n Names) (SlotStatus, error) {
	var s SlotStatus
	// PostgreSQL 12 has neither the slot's wal_status and safe_wal_size
	// nor max_slot_wal_keep_size: its slots keep WAL without limit.
	limits := `coalesce(s.wal_status, ''), s.safe_wal_size,
       CASE WHEN current_setting('max_slot_wal_keep_size') = '-1' THEN -1
            ELSE pg_size_bytes(current_setting('max_slot_wal_keep_size')) END`
	if ServerMajor(conn.PgConn()) < 13 {
		limits = `'', NULL::bigint, -1::bigint`
	}
	err := conn.QueryRow(ctx, `
SELECT s.slot_name IS NOT NULL, coalesce(s.active, false), coalesce(s.confirmed_flush_lsn, '0/0'), coalesce(s.restart_lsn, '0/0'), `+headLSN+`,
       `+limits+`,
       now()
FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`, n.Slot).Scan(&s.Exists, &s.Active, &s.ConfirmedFlushLSN, &s.RestartLSN, &s.CurrentWALLSN,
		&s.WALStatus, &s.SafeWALSize, &s.MaxSlotWALKeepSizeBytes, &s.SourceNow)
	if err != nil {
		return s, fmt.Errorf("read slot %s: %w", n.Slot, err)
	}
	return s, nil
}

// AbortedXids returns those of xids that the source's commit log records as
// aborted. Each xid is a 32-bit transaction id of a transaction that ended
// recently: it is taken in the epoch of the source's next xid, or in the one
// before when it is not below it (fullXid). An xid too old for the commit
// log has no status and is not returned. Only streamed transactions ask
// (protocol version 2, PostgreSQL 14+), so pg_current_snapshot and xid8
// (13+) are always there.
func AbortedXids(ctx context.Context, conn *pgx.Conn, xids []uint32) ([]uint32, error) {
	var next uint64
	if err := conn.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").Scan(&next); err != nil {
		return nil, fmt.Errorf("read the source's next xid: %w", err)
	}
	full := make([]string, len(xids))
	for i, x := range xids {
		full[i] = strconv.FormatUint(fullXid(next, x), 10)
	}
	rows, err := conn.Query(ctx, "SELECT x::bigint FROM unnest($1::text[]) x WHERE pg_xact_status(x::xid8) = 'aborted'", full)
	if err != nil {
		return nil, fmt.Errorf("read the status of %d subtransactions on the source: %w", len(xids), err)
	}
	aborted, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (uint32, error) {
		var x uint64
		err := row.Scan(&x)
		return uint32(x), err
	})
	if err != nil {
		return nil, fmt.Errorf("read the status of %d subtransactions on the source: %w", len(xids), err)
	}
	return aborted, nil
}

// fullXid is the 64-bit id of a past transaction's 32-bit xid, given the
// source's next 64-bit xid: in next's epoch when below next's low half, in
// the epoch before otherwise (the counter wrapped since).
func fullXid(next uint64, xid uint32) uint64 {
	epoch := next >> 32
	if uint64(xid) >= next&0xFFFFFFFF && epoch > 0 {
		epoch--
	}
	return epoch<<32 | uint64(xid)
}

// CommittedHead returns a WAL position every transaction committed on the
// source so far lies before, and makes sure the slot's walsender can pass
// it even when the source then stays idle. pg_current_wal_lsn() alone is
// not enough: the WAL writer writes whole pages, so while a transaction is
// open its last record can straddle that position, and nothing flushes the
// record's end until the next commit on the source (on an idle one, the
// background writer's next running-transactions record, up to 15 s later);
// the walsender decodes only flushed records, so a wait for the position
// would last until then. The same statement assigns a transaction ID: its
// commit record follows the position and, as an asynchronous commit (it
// wrote nothing), is flushed by the WAL writer within wal_writer_delay,
// with everything before it. It costs the source one transaction ID and
// an empty transaction, which pgoutput does not send.
//
// On a standby source it is the position the standby has replayed (a
// standby cannot assign a transaction ID, and replays whole records
// only), in the same round trip.
func CommittedHead(ctx context.Context, conn *pgx.Conn) (pglogrepl.LSN, error) {
	var head pglogrepl.LSN
	if err := conn.QueryRow(ctx, "SELECT "+headLSN+", CASE WHEN NOT pg_is_in_recovery() THEN txid_current() END").Scan(&head, nil); err != nil {
		return 0, fmt.Errorf("read the source's WAL position: %w", err)
	}
	return head, nil
}

// End ends the job's slot and publication while a pgsync run may stream
// from the slot: its walsender is terminated (it exits within 5 s, or End
// fails), then both are dropped. cutover --reverse ends the forward job so,
// so that nothing it streams echoes back.
func End(ctx context.Context, conn *pgx.Conn, n Names) error {
	var pid *int32
	err := conn.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, n.Slot).Scan(&pid)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("look up slot %s: %w", n.Slot, err)
	}
	if pid != nil {
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, *pid); err != nil {
			return fmt.Errorf("end the session streaming slot %s (process %d): %w", n.Slot, *pid, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		released := func(ctx context.Context) (bool, error) {
			var active bool
			if err := conn.QueryRow(ctx, `SELECT coalesce((SELECT active FROM pg_replication_slots WHERE slot_name = $1), false)`, n.Slot).Scan(&active); err != nil {
				return false, fmt.Errorf("look up slot %s: %w", n.Slot, err)
			}
			if active && time.Now().After(deadline) {
				return false, fmt.Errorf("slot %s: %w 5 s after its session was terminated", n.Slot, ErrSlotActive)
			}
			return !active, nil
		}
		if err := periodic.Await(ctx, periodic.Wait{Poll: 5 * time.Millisecond}, released, nil); err != nil {
			return err
		}
	}
	return Drop(ctx, conn, n)
}
