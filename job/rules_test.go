package job

import (
	"errors"
	"strings"
	"testing"
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
