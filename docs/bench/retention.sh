#!/usr/bin/env bash
# retention.sh — a retention sweep deleting 1,000,000 messages while the P1 load runs
# (docs/benchmarks.md, "Retention sweep under load").
#
# One aapd serve with the fake OpenAI-compatible model (../shared/bench/fakeopenai) under P1's load
# (../shared/bench/aapbench: C clients, K turns a session, stream none), as perf.sh runs it. A second
# tenant holds SESSIONS idle sessions of MESSAGES messages each (full and compacted history), seeded
# with generate_series, last changed 100 days ago, its policy idleSessionDays 30. The load is measured
# in windows: BASE windows without a sweep, then windows while `aapd retention sweep --once` (the same
# sweep aapd serve runs) deletes them all, then BASE windows again.
#
#   PGURL=postgres://postgres@127.0.0.1:5432 docs/bench/retention.sh
#
# Environment (defaults in brackets): PGURL [postgres://postgres@127.0.0.1:5432] (no database part;
# a database aapd_retention_<time> is created and dropped), TOOLS [../shared/bench], WORK
# [/tmp/retention-bench], C [8], K [10], WINDOW [15s], BASE [2], SESSIONS [1000], MESSAGES [1000],
# PORT_BASE [18600].
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TOOLS=${TOOLS:-$SRC/../shared/bench}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
WORK=${WORK:-/tmp/retention-bench}
C=${C:-8} K=${K:-10} WINDOW=${WINDOW:-15s} BASE=${BASE:-2}
SESSIONS=${SESSIONS:-1000} MESSAGES=${MESSAGES:-1000}
PORT_BASE=${PORT_BASE:-18600}
FAKE_PORT=$PORT_BASE AAPD_PORT=$((PORT_BASE + 1))
mkdir -p "$WORK/bin" "$WORK/logs"
PIDS=() DB=""
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "$DB" ]; then psql -q "$PGURL/postgres" -c "drop database if exists $DB" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
say() { echo "[$(date +%T)] $*" >&2; }

say "building aapd ($SRC), fakeopenai, aapbench"
(cd "$SRC" && go build -o "$WORK/bin/aapd" ./cmd/aapd)
go build -o "$WORK/bin/fakeopenai" "$TOOLS/fakeopenai/main.go"
go build -o "$WORK/bin/aapbench" "$TOOLS/aapbench/main.go"

DB="aapd_retention_$(date +%s)"
psql -q "$PGURL/postgres" -c "create database $DB" >/dev/null
export DATABASE_URL="$PGURL/$DB?sslmode=disable"
"$WORK/bin/aapd" migrate >/dev/null 2>&1
"$WORK/bin/aapd" tenants create perf >/dev/null 2>&1
"$WORK/bin/aapd" tenants create old >/dev/null 2>&1
KEY=$("$WORK/bin/aapd" keys create --tenant perf --name perf 2>/dev/null | tail -1)
cat >"$WORK/agents.yaml" <<YAML
agents:
  - name: fake
    model:
      provider: openai
      base_url: http://127.0.0.1:$FAKE_PORT/v1
      api_key: x
      models: [fake-model]
YAML
"$WORK/bin/fakeopenai" -addr "127.0.0.1:$FAKE_PORT" >"$WORK/logs/fake.log" 2>&1 &
PIDS+=($!)
# The server's own sweeper sweeps at start, then every --retention-interval: a day, so that the
# one-off sweep below is the one measured.
"$WORK/bin/aapd" serve --addr "127.0.0.1:$AAPD_PORT" --config "$WORK/agents.yaml" --retention-interval 24h \
  >"$WORK/logs/aapd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 150); do curl -fs "127.0.0.1:$AAPD_PORT/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
# The server swept once at start, before the policy was set: seed and set it now, and its next
# sweep is a day away.
sleep 2
"$WORK/bin/aapd" retention set --tenant old --idle-session-days 30 >/dev/null

say "seeding $SESSIONS idle sessions of $MESSAGES messages each (full and compacted history)"
psql -q "$DATABASE_URL" -v ON_ERROR_STOP=1 <<SQL
\set tid '(SELECT id FROM tenants WHERE name = ''old'')'
INSERT INTO sessions (tenant_id, id, agent_name, last_seq, created_at, updated_at)
SELECT :tid, 'sess_' || lpad(to_hex(i), 32, '0'), 'echo', $MESSAGES, now() - interval '100 days', now() - interval '100 days'
FROM generate_series(1, $SESSIONS) i;
INSERT INTO messages (tenant_id, session_id, seq, origin, message, created_at)
SELECT :tid, 'sess_' || lpad(to_hex(i), 32, '0'), s, CASE WHEN s % 2 = 1 THEN 'client' ELSE 'agent' END,
  CASE WHEN s % 2 = 1 THEN '{"role":"user","content":"Hello there, how are you doing today?"}'
       ELSE '{"role":"assistant","content":"I am fine, thank you, and you are welcome here."}' END::json,
  now() - interval '100 days'
FROM generate_series(1, $SESSIONS) i, generate_series(1, $MESSAGES) s;
INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message)
SELECT tenant_id, session_id, seq, seq, message FROM messages WHERE tenant_id = :tid;
VACUUM ANALYZE sessions, messages, compacted_messages;
SQL
SEEDED=$(psql -Atq "$DATABASE_URL" -c "select count(*) from messages m join tenants t on t.id = m.tenant_id where t.name = 'old'")
say "seeded $SEEDED messages"

window() { # label
  local out
  out=$("$WORK/bin/aapbench" -url "http://127.0.0.1:$AAPD_PORT" -key "$KEY" -agent fake -c "$C" -turns "$K" -stream none \
    -warmup 2s -duration "$WINDOW" -message "Hello there, how are you doing today?" -label "$1" | sed -n 's/^RESULT //p')
  echo "$1 $(echo "$out" | sed -n 's/.*"turnsPerSec":\([0-9.]*\).*"p50ms":\([0-9.]*\).*"p99ms":\([0-9.]*\).*/\1 \2 \3/p') $(cut -d' ' -f1 /proc/loadavg)"
}
RES="$WORK/results.$(date +%s)"
for i in $(seq 1 "$BASE"); do window before | tee -a "$RES"; done
say "sweeping"
start=$(date +%s.%N)
"$WORK/bin/aapd" retention sweep --once >"$WORK/logs/sweep.out" 2>"$WORK/logs/sweep.log" &
SWEEP=$!
PIDS+=($SWEEP)
while kill -0 "$SWEEP" 2>/dev/null; do window during | tee -a "$RES"; done
wait "$SWEEP"
took=$(echo "$(date +%s.%N) - $start" | bc)
cat "$WORK/logs/sweep.out"
for i in $(seq 1 "$BASE"); do window after | tee -a "$RES"; done
LEFT=$(psql -Atq "$DATABASE_URL" -c "select count(*) from messages m join tenants t on t.id = m.tenant_id where t.name = 'old'")
echo "sweep: $(grep 'messages deleted' "$WORK/logs/sweep.out" | cut -f2) messages deleted in ${took}s; $LEFT left; batches logged: $(grep -c 'retention batch' "$WORK/logs/sweep.log")"
python3 - "$RES" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 5]
by = {}
for label, tps, p50, p99, load in rows:
    by.setdefault(label, []).append((float(tps), float(p50), float(p99), load))
base = by.get("before", []) + by.get("after", [])
dur = by.get("during", [])
bt, bp = st.median(r[0] for r in base), st.median(r[2] for r in base)
dt, dp = st.median(r[0] for r in dur), st.median(r[2] for r in dur)
print("| windows | turns/s (median) | p99 ms (median) | load (1-min) |")
print("|---|---|---|---|")
for label, rs in (("without a sweep", base), ("during the sweep", dur)):
    print(f"| {label} ({len(rs)}) | {st.median(r[0] for r in rs):.1f} | {st.median(r[2] for r in rs):.1f} | {min(r[3] for r in rs)}-{max(r[3] for r in rs)} |")
print(f"turns/s moved by {100 * (dt - bt) / bt:+.1f}%, p99 by {100 * (dp - bp) / bp:+.1f}%")
PY
