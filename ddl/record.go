// Package ddl carries the source's schema changes to the target, in commit
// order (issue 31, job.ddl = "capture"): the event triggers that capture
// each DDL statement on the source as a transactional logical decoding
// message (capture.go), the record that message holds (this file), and
// the rules that turn its text into what the target runs, or refuse it
// (statements.go).
//
// A record is signed with a key only the job's capture function can read
// (pgsync.ddl_keys on the source, readable by its owner alone): any user of
// the source may call pg_logical_emit_message, and an unsigned message
// would otherwise have the target run whatever SQL it holds as pgsync's
// target user.
package ddl

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Prefix is the prefix of the logical decoding messages that carry a
// captured statement.
const Prefix = "pgsync_ddl"

// Record is one captured statement: what the source's event trigger saw
// when a DDL command touched the job's schemas.
type Record struct {
	// Job is the job whose capture emitted it: a source may serve several
	// jobs, and each applies only its own records.
	Job string `json:"job"`
	// Query is current_query(): the whole statement string the client
	// sent, which may hold several commands (statements.go says how they
	// are handled).
	Query string `json:"query"`
	// SearchPath is the search_path the command ran with on the source.
	SearchPath string `json:"search_path"`
	// Role is the role that ran it (SET ROLE's, else the session's). The
	// target runs the statement as pgsync's target user: the role is for
	// the log and the errors only.
	Role string `json:"role"`
	// Tag is the command tag of the first command captured (ALTER TABLE).
	Tag string `json:"tag"`
	// Elsewhere, when set, makes this a record of its own, emitted after
	// the statement's: the tables whose existing rows the statement gave
	// values that depend on where it runs (where.go). run refuses it.
	Elsewhere []Elsewhere `json:"elsewhere,omitempty"`
	// Outside marks the record of a statement that touched none of the
	// job's schemas, only others: run logs it and applies nothing.
	Outside bool `json:"outside,omitempty"`
}

// envelope is the message's content: the record's JSON text and its
// signature, so that the signature is checked on the very bytes the
// source signed.
type envelope struct {
	Payload string `json:"payload"`
	Sig     string `json:"sig"`
}

// ErrUnsigned is the error of a message whose signature is not the job's
// capture's: it was not emitted by pgsync's event trigger.
var ErrUnsigned = errors.New("not signed by the job's DDL capture")

// Decode reads a message's content and checks its signature with key
// (ReadKey). A record of another job is returned as it is, unchecked: the
// caller ignores it.
func Decode(content []byte, job, key string) (Record, error) {
	var env envelope
	if err := json.Unmarshal(content, &env); err != nil {
		return Record{}, fmt.Errorf("decode a %s message: %w", Prefix, err)
	}
	var r Record
	if err := json.Unmarshal([]byte(env.Payload), &r); err != nil {
		return Record{}, fmt.Errorf("decode a %s message's record: %w", Prefix, err)
	}
	if r.Job != job {
		return r, nil
	}
	if !hmac.Equal([]byte(Sign(key, env.Payload)), []byte(env.Sig)) {
		return r, fmt.Errorf("%s message of job %s: %w", Prefix, job, ErrUnsigned)
	}
	return r, nil
}

// Sign is the signature the capture function computes over payload, in
// SQL with the core's sha256 (pgcrypto's hmac is not always installed):
// hex(sha256(key || hex(sha256(key || payload)))). The outer hash over the
// inner one keeps sha256's length extension from forging a longer payload.
func Sign(key, payload string) string {
	inner := sha256.Sum256([]byte(key + payload))
	outer := sha256.Sum256([]byte(key + hex.EncodeToString(inner[:])))
	return hex.EncodeToString(outer[:])
}

// Encode is the content the capture function emits for r, for tests.
func Encode(r Record, key string) []byte {
	payload, _ := json.Marshal(r)
	env, _ := json.Marshal(envelope{Payload: string(payload), Sig: Sign(key, string(payload))})
	return env
}
