package storetest

import (
	"testing"
	"time"
)

// ClaimedTurn waits, 5 s at most, until a turn holds the session, and
// returns its id: a test that inflicts a fault on a running turn (LoseClaim)
// needs the turn claimed first, however loaded the machine is.
func ClaimedTurn(t testing.TB, dbURL, tenantID, sessionID string) string {
	t.Helper()
	var turnID string
	for deadline := time.Now().Add(5 * time.Second); turnID == ""; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no turn of session %s was claimed within 5 s", sessionID)
		}
		Scan(t, dbURL, `SELECT coalesce(active_turn_id, '') FROM sessions WHERE tenant_id = $1 AND id = $2`,
			[]any{tenantID, sessionID}, &turnID)
	}
	return turnID
}

// LoseClaim leaves the database as a Postgres crash leaves it when it takes
// the claim of a running turn whose claim had not reached the disk (a
// stream "none" turn, docs/durability.md): the turn's record and the
// messages it stored are gone, and the session is free again, its last seq
// back where it was before the turn.
func LoseClaim(t testing.TB, dbURL, tenantID, sessionID, turnID string) {
	t.Helper()
	Exec(t, dbURL, `
		WITH gone AS (DELETE FROM turns WHERE tenant_id = $1 AND session_id = $2 AND id = $3 RETURNING first_seq),
		     msgs AS (DELETE FROM messages WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3),
		     comp AS (DELETE FROM compacted_messages WHERE tenant_id = $1 AND session_id = $2 AND seq >= (SELECT first_seq FROM gone))
		UPDATE sessions SET active_turn_id = NULL, lease_owner = NULL, lease_expires_at = NULL,
		       last_seq = (SELECT first_seq - 1 FROM gone)
		WHERE tenant_id = $1 AND id = $2`, tenantID, sessionID, turnID)
}
