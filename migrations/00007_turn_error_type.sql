-- +goose Up
-- A failed turn says why with a stable type (aap.TurnError): the type is
-- kept beside the message in turns.error. Turns recorded before have none;
-- their records derive it from their status.
ALTER TABLE turns ADD COLUMN error_type text;

-- +goose Down
ALTER TABLE turns DROP COLUMN error_type;
