-- +goose Up
-- The session event log (GET /sessions/:id/events) reads a session's turns
-- in the order they were claimed: by the database's clock, which every
-- replica shares (turn ids are time-ordered by the clock of the process that
-- chose them).
CREATE INDEX turns_session_order ON turns (tenant_id, session_id, created_at, id);

-- +goose Down
DROP INDEX turns_session_order;
