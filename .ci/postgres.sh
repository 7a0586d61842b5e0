# Sourced by .ci/run: start_postgres starts a throwaway PostgreSQL server for the calibration store
# tests and exports its URL as GPU_SIZING_TEST_POSTGRES_URL; the server and its folder go at exit.
# Debian's `postgresql` package is installed when no server binaries are found. PostgreSQL refuses
# to run as root (postgresql.org/docs/current/server-start.html), so as root the server runs as the
# `postgres` user the package creates.

_postgres_bindir() {
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$found" ] && [ -x "$found/initdb" ]; then echo "$found"; return; fi
  command -v initdb >/dev/null 2>&1 && dirname "$(command -v initdb)"
}

_as_server_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_postgres() {
  local bindir folder port
  bindir=$(_postgres_bindir || true)
  if [ -z "$bindir" ]; then
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
    bindir=$(_postgres_bindir)
  fi
  folder=$(mktemp -d /tmp/calibration-postgres.XXXXXX)
  if [ "$(id -u)" = 0 ]; then chown postgres: "$folder"; fi
  port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  _as_server_user "$bindir/initdb" -D "$folder/data" -U postgres -A trust >/dev/null
  _as_server_user "$bindir/pg_ctl" -D "$folder/data" -l "$folder/server.log" -w \
    -o "-p $port -k $folder -c listen_addresses=127.0.0.1" start >/dev/null
  # shellcheck disable=SC2064  # expand now: the trap must stop this server, in this folder
  trap "_as_server_user '$bindir/pg_ctl' -D '$folder/data' -m immediate stop >/dev/null 2>&1; rm -rf '$folder'" EXIT
  export GPU_SIZING_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$port/postgres"
}
