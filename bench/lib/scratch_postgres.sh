# Sourced by bench scripts: a scratch PostgreSQL 15 in "$WORK/pg" (Debian's postgresql-15, as
# deploy/install-deps.sh installs it), listening on a unix socket only, and the cleanup of every
# process the script started (PIDS), however it exits. The caller sets WORK before sourcing.
PG_BIN=/usr/lib/postgresql/15/bin
PG_PORT=${PG_PORT:-5499}  # Names the unix socket in WORK/pg only: PostgreSQL listens on no TCP address.
[[ -x $PG_BIN/initdb ]] || { echo "$0: $PG_BIN/initdb is missing: run deploy/install-deps.sh (postgresql-15)" >&2; exit 1; }

# PostgreSQL refuses to run as root: as root, run its tools as the postgres user.
as_pg() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

PIDS=()
PG_STARTED=0
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ $PG_STARTED -eq 1 ]]; then as_pg "$PG_BIN/pg_ctl" -D "$WORK/pg/data" -m fast -w stop >/dev/null || true; fi
}
# Each program runs in the background and is waited for, so a signal to the script runs the
# cleanup at once instead of after the program it is waiting on.
run() {
  "$@" &
  local pid=$!
  PIDS+=("$pid")
  wait "$pid"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_postgres() {
  rm -rf "$WORK/pg"
  mkdir -p "$WORK/pg"
  [[ $(id -u) -eq 0 ]] && chown postgres "$WORK/pg"
  as_pg "$PG_BIN/initdb" -D "$WORK/pg/data" -A trust -U postgres >"$WORK/pg/initdb.log"
  as_pg "$PG_BIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/server.log" -w -t 60 \
    -o "-k $WORK/pg -p $PG_PORT -c listen_addresses=''" start >/dev/null
  PG_STARTED=1
}
psql_pg() { as_pg psql -q -h "$WORK/pg" -p "$PG_PORT" -U postgres -d postgres -c "$1"; }
uri() { echo "postgresql:///$1?host=$WORK/pg&port=$PG_PORT&user=postgres"; }

wait_serving() {  # PORT TOKEN: until fusord answers a call
  for _ in $(seq 1 120); do
    if FUSOR_TOKEN=$2 "$FUSOR" targets list --server "127.0.0.1:$1" --timeout 5 >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "$0: fusord on port $1 did not come up; see $WORK/*.log" >&2
  return 1
}
