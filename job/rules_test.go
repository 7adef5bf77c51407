package job

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgsync/pgsync/replication"
)

// A refusal carries the sentinel of its first item's rule (cmd words the
// remedy from it) and check's words for every item.
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		item string
		want error
	}{
		{itemTypes, ErrMissingExtension},
		{itemExtensions, ErrMissingExtension},
		{itemDefaultFunctions, ErrMissingFunction},
		{itemRoles, ErrMissingRole},
		{itemLargeObjects, ErrLargeObjectsInTheWay},
		{"table public.t", ErrTargetTable},
		{itemSchema, ErrChecks},
	} {
		first := CheckItem{Item: tc.item, Status: CheckFail, Detail: "what is wrong", Fix: "what to do"}
		second := CheckItem{Item: itemSchema, Status: CheckFail, Detail: "pg_dump 12", Fix: "install pg_dump 15 or newer"}
		err := refusal(first, second)
		if !errors.Is(err, tc.want) {
			t.Errorf("refusal(%s) = %v, want it to wrap %v", tc.item, err, tc.want)
		}
		for _, it := range []CheckItem{first, second} {
			if words := FailedItems([]CheckItem{it}); !strings.Contains(err.Error(), words) {
				t.Errorf("refusal(%s) = %q, want check's words %q", tc.item, err, words)
			}
		}
	}
}

// The failover rule for each kind of source: without standbys, with
// standbys held back by synchronized_standby_slots or not, naming a slot
// that does not exist, and before failover slots.
func TestRuleFailover(t *testing.T) {
	held := replication.Standby{Name: "standby1", Slot: "standby1_slot"}
	for _, tc := range []struct {
		name   string
		major  int
		st     replication.Standbys
		status string
		says   string
	}{
		{"17 alone", 17, replication.Standbys{}, CheckOK, "failover = true; no standby streams"},
		{"17 held", 17, replication.Standbys{Streaming: []replication.Standby{held}, SynchronizedSlots: []string{"standby1_slot"}}, CheckOK, "holds it back for standby standby1 (slot standby1_slot)"},
		{"17 standby without slot", 17, replication.Standbys{Streaming: []replication.Standby{held, {Name: "standby2"}}, SynchronizedSlots: []string{"standby1_slot"}},
			CheckWarn, "standby standby2 (no physical slot) is not held back"},
		{"17 slot not listed", 17, replication.Standbys{Streaming: []replication.Standby{held}}, CheckWarn, "standby1 (slot standby1_slot) is not held back"},
		{"18 listed slot missing", 18, replication.Standbys{Streaming: []replication.Standby{held}, SynchronizedSlots: []string{"standby1_slot", "gone"}, MissingSlots: []string{"gone"}},
			CheckWarn, "names gone, no physical slot"},
		{"16 alone", 16, replication.Standbys{}, CheckOK, "PostgreSQL 16 has no failover slots"},
		{"13 with a standby", 13, replication.Standbys{Streaming: []replication.Standby{held}}, CheckWarn, "PostgreSQL 13 has no failover slots"},
	} {
		got := ruleFailover(tc.major, tc.st)
		if got.Item != itemFailover || got.Status != tc.status || !strings.Contains(got.Detail, tc.says) {
			t.Errorf("%s: ruleFailover = %+v, want %s saying %q", tc.name, got, tc.status, tc.says)
		}
		if got.Status == CheckWarn && got.Fix == "" {
			t.Errorf("%s: a WARN without a fix: %+v", tc.name, got)
		}
	}
}

// A standby source: each refusal with its fix, the warning without a
// physical slot, and the accepted case; a primary without
// source.primary_url is no finding.
func TestRuleStandbySource(t *testing.T) {
	good := replication.StandbySource{HotStandbyFeedback: true, PrimarySlotName: "standby1", SameSystem: true, PrimaryWALLevel: "logical"}
	with := func(f func(*replication.StandbySource)) replication.StandbySource {
		ss := good
		f(&ss)
		return ss
	}
	for _, tc := range []struct {
		name   string
		in     standbySource
		status string
		says   string
	}{
		{"a primary", standbySource{major: 17}, "", ""},
		{"a primary named primary", standbySource{major: 17, primarySet: true}, CheckFail, "reaches a primary, not a hot standby"},
		{"a standby of 15", standbySource{major: 15, inRecovery: true, primarySet: true}, CheckFail, "PostgreSQL 15, which cannot decode on a standby"},
		{"no primary_url", standbySource{major: 17, inRecovery: true}, CheckFail, "does not name"},
		{"primary_url a standby", standbySource{major: 17, inRecovery: true, primarySet: true, facts: with(func(s *replication.StandbySource) { s.PrimaryInRecovery = true })}, CheckFail, "reaches a standby too"},
		{"another cluster", standbySource{major: 17, inRecovery: true, primarySet: true, facts: with(func(s *replication.StandbySource) { s.SameSystem = false })}, CheckFail, "system identifiers differ"},
		{"replica wal_level", standbySource{major: 16, inRecovery: true, primarySet: true, facts: with(func(s *replication.StandbySource) { s.PrimaryWALLevel = "replica" })}, CheckFail, `wal_level is "replica"`},
		{"no feedback", standbySource{major: 17, inRecovery: true, primarySet: true, facts: with(func(s *replication.StandbySource) { s.HotStandbyFeedback = false })}, CheckFail, "hot_standby_feedback is off"},
		{"no physical slot", standbySource{major: 17, inRecovery: true, primarySet: true, facts: with(func(s *replication.StandbySource) { s.PrimarySlotName = "" })}, CheckWarn, "without a physical slot"},
		{"accepted", standbySource{major: 16, inRecovery: true, primarySet: true, facts: good}, CheckOK, "hot standby of PostgreSQL 16 (physical slot standby1"},
	} {
		got := ruleStandbySource(tc.in)
		if got.Status != tc.status || !strings.Contains(got.Detail, tc.says) {
			t.Errorf("%s: ruleStandbySource = %+v, want %q saying %q", tc.name, got, tc.status, tc.says)
		}
		if (got.Status == CheckFail || got.Status == CheckWarn) && got.Fix == "" {
			t.Errorf("%s: no fix: %+v", tc.name, got)
		}
	}
}
