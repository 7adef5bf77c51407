package replication

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Standbys is what the source knows of its physical standbys, for the
// judgement whether the job's slot survives a failover to one of them.
// Whether a standby synchronizes slots (its sync_replication_slots) can
// only be read on the standby: the source sees which standbys stream,
// through which physical slot, and which slots its
// synchronized_standby_slots names.
type Standbys struct {
	// InRecovery: the source is itself a standby (pg_is_in_recovery()).
	InRecovery bool
	// Streaming are the physical walsenders, one per standby streaming.
	Streaming []Standby
	// SynchronizedSlots is synchronized_standby_slots (17+), the
	// physical slots whose standbys must have received WAL before a
	// failover slot's walsender sends it.
	SynchronizedSlots []string
	// MissingSlots are those of SynchronizedSlots that are no physical
	// slot of the source: the walsender of a failover slot waits for them
	// (and logs a WARNING) until they exist.
	MissingSlots []string
}

// Standby is one standby streaming from the source.
type Standby struct {
	// Name is its application_name (cluster_name or primary_conninfo's).
	Name string
	// Slot is the physical slot it streams through, "" when none.
	Slot string
}

// ReadStandbys reads the source's standbys. major is the source's major:
// synchronized_standby_slots exists from 17 on.
func ReadStandbys(ctx context.Context, conn *pgx.Conn, major int) (Standbys, error) {
	var st Standbys
	// A physical walsender's session has no database; a logical one (a
	// subscription, this job's own run) has. A standby that streams
	// through a slot holds it active.
	rows, err := conn.Query(ctx, `SELECT pg_is_in_recovery(), r.application_name::text, coalesce(s.slot_name::text, '')
FROM (SELECT 1) one
LEFT JOIN (pg_stat_replication r JOIN pg_stat_activity a ON a.pid = r.pid AND a.datname IS NULL) ON true
LEFT JOIN pg_replication_slots s ON s.active_pid = r.pid AND s.slot_type = 'physical'
ORDER BY 2, 3`)
	if err != nil {
		return st, fmt.Errorf("read the source's standbys: %w", err)
	}
	for rows.Next() {
		var name *string
		var slot string
		if err := rows.Scan(&st.InRecovery, &name, &slot); err != nil {
			return st, fmt.Errorf("read the source's standbys: %w", err)
		}
		if name != nil {
			st.Streaming = append(st.Streaming, Standby{Name: *name, Slot: slot})
		}
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("read the source's standbys: %w", err)
	}
	if major < FailoverSlotsMajor {
		return st, nil
	}
	var list, missing string
	err = conn.QueryRow(ctx, `WITH named AS (
  SELECT n FROM unnest(string_to_array(replace(current_setting('synchronized_standby_slots'), ' ', ''), ',')) n WHERE n <> '')
SELECT current_setting('synchronized_standby_slots'),
       coalesce((SELECT string_agg(n, ',') FROM named
                 WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = n AND slot_type = 'physical')), '')`).
		Scan(&list, &missing)
	if err != nil {
		return st, fmt.Errorf("read the source's synchronized_standby_slots: %w", err)
	}
	st.SynchronizedSlots = splitList(list)
	st.MissingSlots = splitList(missing)
	return st, nil
}

// splitList splits a setting's comma-separated list.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// StandbySource is what decides whether a hot standby can be a job's
// source, read on the standby and on the primary named beside it.
type StandbySource struct {
	// HotStandbyFeedback (the standby's hot_standby_feedback) keeps the
	// primary from removing catalog rows the standby's slot still needs;
	// without it the slot is invalidated.
	HotStandbyFeedback bool
	// PrimarySlotName is the standby's primary_slot_name: without a
	// physical slot, the feedback holds only while the standby is
	// connected.
	PrimarySlotName string
	// SameSystem: the primary's system identifier is the standby's (the
	// primary url names this standby's primary, not another cluster).
	SameSystem bool
	// PrimaryInRecovery: the primary url reaches a standby too.
	PrimaryInRecovery bool
	// PrimaryWALLevel is the primary's wal_level: logical decoding on a
	// standby needs logical on the primary.
	PrimaryWALLevel string
}

// ReadStandbySource reads what StandbySource holds, on the standby and
// on its primary.
func ReadStandbySource(ctx context.Context, standby, primary *pgx.Conn) (StandbySource, error) {
	var ss StandbySource
	var standbyID, primaryID int64
	if err := standby.QueryRow(ctx, `SELECT current_setting('hot_standby_feedback')::bool, current_setting('primary_slot_name'),
       (SELECT system_identifier FROM pg_control_system())`).Scan(&ss.HotStandbyFeedback, &ss.PrimarySlotName, &standbyID); err != nil {
		return ss, fmt.Errorf("read the standby source's settings: %w", err)
	}
	if err := primary.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('wal_level'), (SELECT system_identifier FROM pg_control_system())`).
		Scan(&ss.PrimaryInRecovery, &ss.PrimaryWALLevel, &primaryID); err != nil {
		return ss, fmt.Errorf("read the source primary's settings: %w", err)
	}
	ss.SameSystem = standbyID == primaryID
	return ss, nil
}
