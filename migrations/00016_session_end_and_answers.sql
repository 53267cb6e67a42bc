-- +goose Up
-- What doors beyond AAP need of the pipeline (the sandbox-agent door,
-- docs/protocols.md), kept where every door finds it.
--
-- sessions.ended_at: the session was ended (sandbox-agent's terminate): no
-- turn runs on it again.
ALTER TABLE sessions ADD COLUMN ended_at timestamptz;
-- sessions.labels: what a door's client set on the session that AAP has no
-- member for (sandbox-agent's agentMode, permissionMode, variant), stored
-- to be shown back; {"name": "value"}, NULL for none.
ALTER TABLE sessions ADD COLUMN labels json;
-- sessions.pending_answers: answers to some of the session's pending tool
-- calls, sent one at a time, kept until the last call is answered and the
-- turn they all make starts (which clears them); NULL for none.
ALTER TABLE sessions ADD COLUMN pending_answers json;
-- turns.permissions: the permissions the turn was started with
-- ([{toolCallId, granted, forSession}]), tool_permission messages being
-- stored nowhere else; NULL for none.
ALTER TABLE turns ADD COLUMN permissions json;
-- turns.pending: the tool calls the session waited on when the turn ended,
-- as its end wrote them to the session; NULL for a turn that ended before
-- this column, or has not ended.
ALTER TABLE turns ADD COLUMN pending json;

-- +goose Down
ALTER TABLE turns DROP COLUMN pending;
ALTER TABLE turns DROP COLUMN permissions;
ALTER TABLE sessions DROP COLUMN pending_answers;
ALTER TABLE sessions DROP COLUMN labels;
ALTER TABLE sessions DROP COLUMN ended_at;
