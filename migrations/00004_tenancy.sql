-- +goose Up
-- Tenancy (docs/tenancy.md): sessions owned by an end user, token issuers,
-- per-tenant limits, and usage that outlives deleted sessions.

-- The end user (a JWT's sub) a session belongs to; NULL for a session
-- created with an API key, which only keys see.
ALTER TABLE sessions ADD COLUMN owner text;
-- An end user's listing: the same keyset order as the tenant's.
CREATE INDEX sessions_owner ON sessions (tenant_id, owner, id) WHERE owner IS NOT NULL;

-- Keys made before scopes were enforced could do everything: they keep
-- doing so, now by saying it.
UPDATE api_keys SET scopes = '{sessions:read,sessions:write}' WHERE scopes = '{}';

-- A token issuer of a tenant: JWTs whose (iss, aud) match are the tenant's
-- end users. Keys come from jwks_url or from public_keys (PEM), never both.
CREATE TABLE token_issuers (
    tenant_id   uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id          text        NOT NULL,
    issuer      text        NOT NULL,
    audience    text        NOT NULL,
    jwks_url    text,
    public_keys text[]      NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    CHECK ((jwks_url IS NULL) <> (cardinality(public_keys) = 0))
);
-- The pair (issuer, audience) names one tenant: how a token finds its tenant.
CREATE UNIQUE INDEX token_issuers_iss_aud ON token_issuers (issuer, audience);

-- A tenant's limits; NULL is the server's default (flags of aapd serve).
ALTER TABLE tenants
    ADD COLUMN requests_per_second double precision CHECK (requests_per_second > 0),
    ADD COLUMN burst               integer CHECK (burst > 0),
    ADD COLUMN max_running_turns   integer CHECK (max_running_turns > 0);

-- Usage of deleted sessions, rolled up when they are deleted, so that a
-- tenant's usage report does not shrink. Live sessions' usage is read
-- from their turns.
CREATE TABLE usage_daily (
    tenant_id     uuid   NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    day           date   NOT NULL,
    agent_name    text   NOT NULL,
    turns         bigint NOT NULL DEFAULT 0,
    input_tokens  bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, day, agent_name)
);

-- +goose Down
DROP TABLE usage_daily;
ALTER TABLE tenants DROP COLUMN requests_per_second, DROP COLUMN burst, DROP COLUMN max_running_turns;
DROP TABLE token_issuers;
DROP INDEX sessions_owner;
ALTER TABLE sessions DROP COLUMN owner;
