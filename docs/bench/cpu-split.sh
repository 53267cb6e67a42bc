#!/usr/bin/env bash
# cpu-split.sh — where a turn's CPU goes: aapd's echo turns (driven by aapbench) or pgbench replaying
# their SQL (pgbench/turn_none.sql), at one concurrency, split between aapd, the load tool, Postgres
# (its postmaster and every backend, exited ones included) and the rest of the machine, per turn.
#
#   AAPD_BIN=<aapd> AAPBENCH=<aapbench> PGURL=postgres://postgres@127.0.0.1:5499 PGDATA=<cluster dir> \
#     docs/bench/cpu-split.sh aapd 8        # or: ... cpu-split.sh pgbench 8
#
# Environment: T (seconds) [8], PORT [18703], SEED (pgbench's session seeding) [../shared/bench/pgbench/
# seed.sql beside this checkout]. The database cpusplit is created (and dropped) on PGURL; PGDATA is the
# data directory of PGURL's cluster (its postmaster.pid names the process to count).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WHO=${1:?aapd or pgbench}; C=${2:-8}; T=${T:-8}; PORT=${PORT:-18703}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5499}
SEED=${SEED:-$HERE/../../../shared/bench/pgbench/seed.sql}
: "${AAPD_BIN:?}" "${PGDATA:?}"
DB=cpusplit
psql -q "$PGURL/postgres" -c "drop database if exists $DB" -c "create database $DB" >/dev/null 2>&1
trap 'psql -q "$PGURL/postgres" -c "drop database if exists $DB" >/dev/null 2>&1 || true' EXIT
export DATABASE_URL="$PGURL/$DB?sslmode=disable"
"$AAPD_BIN" migrate >/dev/null 2>&1
"$AAPD_BIN" tenants create split >/dev/null 2>&1
KEY=$("$AAPD_BIN" keys create --tenant split 2>/dev/null | tail -1)

ticks_machine() { awk '/^cpu /{print $2+$3+$4+$6+$7+$8}' /proc/stat; }
ticks_pid() { awk '{print $14+$15}' "/proc/$1/stat"; }
ticks_postgres() { # the postmaster, its reaped children, its live children
  local pm t
  pm=$(head -1 "$PGDATA/postmaster.pid")
  t=$(awk '{print $14+$15+$16+$17}' "/proc/$pm/stat")
  for c in $(pgrep -P "$pm"); do t=$((t + $(ticks_pid "$c" 2>/dev/null || echo 0))); done
  echo "$t"
}
hz=$(getconf CLK_TCK)
if [ "$WHO" = aapd ]; then
  : "${AAPBENCH:?}"
  printf 'agents:\n  - name: echo\n    model:\n      provider: echo\n' >"/tmp/cpusplit-agents.yaml"
  "$AAPD_BIN" serve --addr "127.0.0.1:$PORT" --config /tmp/cpusplit-agents.yaml >/tmp/cpusplit-aapd.log 2>&1 &
  APID=$!
  trap 'kill $APID 2>/dev/null; wait $APID 2>/dev/null; psql -q "$PGURL/postgres" -c "drop database if exists $DB" >/dev/null 2>&1 || true' EXIT
  for _ in $(seq 1 100); do curl -fs "127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  p0=$(ticks_postgres); m0=$(ticks_machine); a0=$(ticks_pid "$APID")
  out=$("$AAPBENCH" -url "http://127.0.0.1:$PORT" -key "$KEY" -agent echo -c "$C" -turns 10 -stream none -warmup 0s \
    -duration "${T}s" -message "Hello there, how are you doing today?" -label aapd | sed -n 's/^RESULT //p')
  p1=$(ticks_postgres); m1=$(ticks_machine); a1=$(ticks_pid "$APID")
  n=$(echo "$out" | sed -n 's/.*"turnsTotal":\([0-9]*\).*/\1/p')
  rate=$(echo "$out" | sed -n 's/.*"turnsPerSec":\([0-9.]*\).*/\1/p')
  client=$(echo "$out" | sed -n 's/.*"clientCpuS":\([0-9.]*\).*/\1/p')
  own=$(( a1 - a0 ))
else
  read -r TENANT PUB < <(psql -Atq -F' ' "$PGURL/$DB" -c "select t.id, k.public_id from tenants t join api_keys k on k.tenant_id = t.id")
  psql -q "$PGURL/$DB" -v nsess=$((C * 50 + 1000)) -v tenant="$TENANT" -f "$SEED" >/dev/null
  psql -q "$PGURL/$DB" -c "vacuum analyze" >/dev/null
  p0=$(ticks_postgres); m0=$(ticks_machine)
  out=$( { /usr/bin/time -f "CPU %U %S" pgbench -n -M prepared -j "$(( C > 1 ? 2 : 1 ))" -c "$C" -T "$T" \
    -f "$HERE/pgbench/turn_none.sql" -D tenant="$TENANT" -D pub="$PUB" -D m=50 -D off=0 "$PGURL/$DB"; } 2>&1)
  p1=$(ticks_postgres); m1=$(ticks_machine)
  n=$(echo "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
  rate=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  client=$(echo "$out" | sed -n 's/^CPU \([0-9.]*\) \([0-9.]*\)$/\1 \2/p' | awk '{print $1 + $2}')
  own=0
fi
awk -v who="$WHO" -v c="$C" -v n="$n" -v rate="$rate" -v hz="$hz" -v m="$((m1 - m0))" -v own="$own" \
  -v pg="$((p1 - p0))" -v client="$client" 'BEGIN {
  ms = 1000 / hz / n; all = m * ms; o = own * ms; p = pg * ms; cl = client * 1000 / n
  printf "%s c=%d: %.0f turns/s; CPU ms per turn: all %.2f, aapd %.2f, load tool %.2f, postgres %.2f, rest %.2f\n",
    who, c, rate, all, o, cl, p, all - o - cl - p }'
