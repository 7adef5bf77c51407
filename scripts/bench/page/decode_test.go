package main

import (
	"strings"
	"testing"
)

func TestDecodeStrict(t *testing.T) {
	type run struct {
		Seconds float64  `json:"seconds"`
		RSS     *float64 `json:"rss_peak_mb" bench:"optional"`
	}
	type env struct {
		Commit string `json:"pgsync_commit"`
	}
	type doc struct {
		Env  env   `json:"environment"`
		Runs []run `json:"runs"`
	}
	for _, tc := range []struct {
		name, in, err string
	}{
		{"all there", `{"environment":{"pgsync_commit":"abc"},"runs":[{"seconds":1.5,"rss_peak_mb":3}]}`, ""},
		{"optional null", `{"environment":{"pgsync_commit":"abc"},"runs":[{"seconds":1.5,"rss_peak_mb":null}]}`, ""},
		{"optional absent", `{"environment":{"pgsync_commit":"abc"},"runs":[{"seconds":1.5}]}`, ""},
		{"missing key", `{"environment":{"pgsync_commit":"abc"},"runs":[{"rss_peak_mb":3}]}`, "f.json: runs[0].seconds: missing"},
		{"null is missing", `{"environment":{"pgsync_commit":"abc"},"runs":[{"seconds":null}]}`, "f.json: runs[0].seconds: missing"},
		{"nested", `{"environment":{},"runs":[]}`, "f.json: environment.pgsync_commit: missing"},
		{"wrong shape", `{"environment":{"pgsync_commit":"abc"},"runs":{}}`, "f.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			err := decodeStrict("f.json", []byte(tc.in), &d)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
				t.Fatalf("error = %v, want prefix %q", err, tc.err)
			}
		})
	}
}
