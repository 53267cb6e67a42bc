-- +goose Up
-- turns.labels: what a door's client set on a turn that AAP has no member
-- for (store.TurnBeginParams.Labels), kept so that the turn is answered
-- later as it was asked: the OpenAI door's response parameters (metadata,
-- tools, tool_choice, instructions, …) returned by GET /responses/{id}.
-- turns is a tenant's table behind the wall already (00030).
ALTER TABLE turns ADD COLUMN labels json;

-- +goose Down
ALTER TABLE turns DROP COLUMN labels;
