#!/usr/bin/env bash
# The shared history in a real PostgreSQL 15, started by this test on 127.0.0.1 in a temporary directory
# (initdb + pg_ctl -w, which returns once the server accepts connections) and stopped at the end.
#   - diagnose --history postgresql://... stores; history list|show|stats read it back;
#   - two "machines" (two HOME directories, so two local salts) diagnosing the same failing host count as one
#     host in `history stats --by host`, and the second report carries the recurrence note: the salt is in
#     the database;
#   - eight first opens at once against an empty database migrate once (advisory lock) and all store;
#   - a password in the URI never reaches an error message (also beside a bad percent-encoding, which libpq
#     quotes); an unreachable server is one line, and the diagnosis is still printed;
#   - a libpq keyword/value string ("host=... password=...") is a connection, never a SQLite file name;
#   - a role with SELECT only lists an up-to-date history (no migration is attempted).
# usage: postgres_test.sh FIREFAULT_BIN TESTS_DIR
set -euo pipefail
BIN="$(readlink -f "$1")"
TESTS="$(readlink -f "$2")"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$PGBIN" ] || [ ! -x "$PGBIN/initdb" ]; then
  echo "postgres_test: PostgreSQL server binaries not found (Debian package postgresql): run scripts/install-deps.sh" >&2
  exit 1
fi
tmp=$(mktemp -d /tmp/ff-pg.XXXXXX)
chmod 755 "$tmp"
as_pg=()
if [ "$(id -u)" -eq 0 ]; then  # initdb refuses to run as root
  id postgres >/dev/null 2>&1 || { echo "postgres_test: no postgres user (package postgresql)" >&2; exit 1; }
  as_pg=(runuser -u postgres --)
  chown postgres "$tmp"
fi
stop() {
  "${as_pg[@]}" "$PGBIN/pg_ctl" -D "$tmp/data" -m immediate stop >/dev/null 2>&1 || true
  [ -n "${KEEP_PG:-}" ] || rm -rf "$tmp"
}
trap stop EXIT
fail() {
  echo "postgres_test: FAIL: $*" >&2
  exit 1
}
"${as_pg[@]}" "$PGBIN/initdb" -D "$tmp/data" -U ff --auth=trust -E UTF8 >"$tmp/initdb.log" 2>&1 || { cat "$tmp/initdb.log"; fail "initdb"; }
# A free port: ask the kernel for one (tests/cli/lib.sh).
. "$TESTS/cli/lib.sh"
port=$(port)
"${as_pg[@]}" "$PGBIN/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w -t 120 \
  -o "-h 127.0.0.1 -p $port -k $tmp -c fsync=off" start >/dev/null || { cat "$tmp/server.log"; fail "pg_ctl start"; }
URL="postgresql://ff@127.0.0.1:$port/postgres"
echo "postgres_test: PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$port"

oom="$TESTS/corpus/run2-torchrun-cgroup-oom-rank0/logs"
[ -d "$oom" ] || fail "corpus case missing: $oom"
export XDG_DATA_HOME="$tmp/home-a"
# Eight first opens at once on the empty database: one migration, eight rows.
pids=()
for i in 1 2 3 4 5 6 7 8; do
  "$BIN" diagnose "$oom" --quiet --format brief --history "$URL" >"$tmp/par-$i.out" 2>"$tmp/par-$i.err" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
for i in 1 2 3 4 5 6 7 8; do
  [ -s "$tmp/par-$i.err" ] && { cat "$tmp/par-$i.err"; fail "concurrent first open $i wrote an error"; }
done
n=$("$BIN" history list --history "$URL" --format json --limit 100 | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$n" = 8 ] || fail "8 concurrent diagnoses stored $n rows"
ver=$("${as_pg[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U ff -d postgres -Atc "SELECT value FROM firstfault_meta WHERE key='schema_version'")
[ "$ver" = 2 ] || fail "schema_version is '$ver'"

# Two machines: the same failing host from two HOMEs (two local salt files) is one host in the database.
host_log="$tmp/xid.log"
cat >"$host_log" <<'EOF'
2026-11-30T10:00:00.000000+00:00 gpu-node-31 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=2231, name=python, GPU has fallen off the bus.
2026-11-30T10:00:01.000000+00:00 gpu-node-31 kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.
EOF
XDG_DATA_HOME="$tmp/home-b" "$BIN" diagnose "$host_log" --quiet --format json --history "$URL" >"$tmp/b.json" || true
XDG_DATA_HOME="$tmp/home-c" "$BIN" diagnose "$host_log" --quiet --format json --history "$URL" >"$tmp/c.json" || true
python3 - "$tmp/b.json" "$tmp/c.json" <<'EOF' || fail "reports of the host failure"
import json, sys
b, c = (json.load(open(p)) for p in sys.argv[1:3])
assert b["verdict"] == "failure" and b["initiating_host"], b["root_cause"]
assert (b.get("recurrences") or {}).get("count") == 0, "first report: " + json.dumps(b.get("recurrences"))
assert (c.get("recurrences") or {}).get("count") == 1, "the second machine's report does not count the first: " + json.dumps(c.get("recurrences"))
EOF
"$BIN" history stats --by host --history "$URL" >"$tmp/stats.txt"
grep -Eq '^ *2 +gpu-node-31' "$tmp/stats.txt" || { cat "$tmp/stats.txt"; fail "history stats --by host does not count the host twice"; }
"$BIN" history stats --by kind --history "$URL" | grep -q "host_oom\|gpu_fell_off_bus" || fail "history stats --by kind"
id=$("$BIN" history list --history "$URL" --format json --limit 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
"$BIN" history show "$id" --history "$URL" --format json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["verdict"]=="failure", d' ||
  fail "history show $id"
# The default stores the host as its report shows it (docs/security.md); a --redact report stores only the
# pseudonym, and its salted key is the real host's: it counts as a third failure of the same node.
dump=$("${as_pg[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U ff -d postgres -Atc "SELECT report_json || inputs || initiating_host FROM diagnoses")
case "$dump" in *gpu-node-31*) ;; *) fail "the default report's host is not in PostgreSQL";; esac
XDG_CONFIG_HOME="$tmp/cfg" XDG_DATA_HOME="$tmp/home-b" "$BIN" diagnose "$host_log" --redact --quiet --format json --history "$URL" >"$tmp/r.json" || true
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["initiating_host"].startswith("node-") and (d.get("recurrences") or {}).get("count") == 2, d.get("recurrences")' "$tmp/r.json" ||
  fail "a --redact report does not name a pseudonym or count the node's two earlier failures"
rdump=$("${as_pg[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U ff -d postgres -Atc "SELECT report_json || inputs || coalesce(initiating_host, '') FROM diagnoses ORDER BY id DESC LIMIT 1")
case "$rdump" in *gpu-node-31*) fail "a --redact report stored a real host name in PostgreSQL";; esac

# The action columns (schema 2): the Xid 79 host's rows say restart-excluding-hosts and name it.
act=$("${as_pg[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U ff -d postgres -Atc \
  "SELECT DISTINCT action || ' ' || action_hosts FROM diagnoses WHERE kind = 'gpu_fell_off_bus' AND initiating_host = 'gpu-node-31'")
[ "$act" = "restart-excluding-hosts gpu-node-31" ] || fail "action columns of the Xid 79 rows: '$act'"
# A history written by schema version 1 is migrated: the rows stay, with an empty action.
"${as_pg[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U ff -d postgres -qAtc "CREATE DATABASE v1" >/dev/null
"${as_pg[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U ff -d v1 -qAtc "
  CREATE TABLE firstfault_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
  INSERT INTO firstfault_meta VALUES('schema_version', '1'), ('host_salt', 'abc');
  CREATE TABLE diagnoses(id BIGSERIAL PRIMARY KEY, created_at BIGINT NOT NULL, source TEXT NOT NULL, inputs TEXT NOT NULL,
    verdict TEXT NOT NULL, signature TEXT, kind TEXT, initiating_rank INTEGER, initiating_host TEXT, host_key TEXT,
    report_json TEXT NOT NULL);
  INSERT INTO diagnoses(created_at, source, inputs, verdict, kind, report_json) VALUES(1700000000, 'diagnose', 'old/', 'failure', 'cuda_oom', '{}');" >/dev/null
XDG_DATA_HOME="$tmp/home-b" "$BIN" diagnose "$host_log" --quiet --format brief --history "postgresql://ff@127.0.0.1:$port/v1" >/dev/null || true
ver=$("${as_pg[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U ff -d v1 -Atc "SELECT value FROM firstfault_meta WHERE key='schema_version'")
[ "$ver" = 2 ] || fail "a version 1 history was migrated to '$ver'"
rows=$("${as_pg[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U ff -d v1 -Atc "SELECT inputs || '|' || action FROM diagnoses ORDER BY id")
case "$rows" in "old/|"$'\n'*"|restart-excluding-hosts") ;; *) fail "version 1 rows after the migration: $rows";; esac

# Errors: a password never shown; an unreachable database is one line and the report is still printed.
dead=$(port)
set +e
out=$("$BIN" diagnose "$oom" --quiet --format brief --history "postgresql://ff:hunter2secret@127.0.0.1:$dead/postgres?connect_timeout=5" 2>"$tmp/err.txt")
set -e
grep -q "hunter2secret" "$tmp/err.txt" && fail "the password is in an error message: $(cat "$tmp/err.txt")"
grep -q "cannot connect to the history database" "$tmp/err.txt" || fail "no clear error for an unreachable database: $(cat "$tmp/err.txt")"
[ "$(wc -l <"$tmp/err.txt")" -le 2 ] || fail "the error is more than one line: $(cat "$tmp/err.txt")"
case "$out" in *failure*|*FAIL*|*oom*) ;; *) fail "no report printed when the database is unreachable: $out";; esac
set +e
"$BIN" history list --history "postgresql://ff:hunter2secret@127.0.0.1:$dead/postgres?connect_timeout=5" 2>"$tmp/err2.txt"
rc=$?
set -e
[ $rc -ne 0 ] || fail "history list against a dead server exited 0"
grep -q "hunter2secret" "$tmp/err2.txt" && fail "the password is in history's error message"
# libpq quotes a bad percent-encoding with what surrounds it: a password beside one must not be shown.
for bad in "postgresql://ff:ab%zzhunter3pass@127.0.0.1:$port/postgres" "postgresql://ff@127.0.0.1:$port/postgres?password=hunter3pass%GG"; do
  set +e
  "$BIN" history list --history "$bad" >/dev/null 2>"$tmp/err3.txt"
  set -e
  grep -q "hunter3pass" "$tmp/err3.txt" && fail "a password next to a bad percent-encoding is in the error: $(cat "$tmp/err3.txt")"
  [ -s "$tmp/err3.txt" ] || fail "no error for a bad percent-encoding in $bad"
done
# libpq's keyword/value form is a connection string, never the name of a SQLite file to create.
mkdir -p "$tmp/cwd"
(cd "$tmp/cwd" && "$BIN" history list --history "host=127.0.0.1 port=$port user=ff dbname=postgres password=hunter4pass" --format json --limit 1 \
  >"$tmp/kv.json" 2>"$tmp/kv.err") || fail "history list with a keyword/value connection string: $(cat "$tmp/kv.err")"
[ -z "$(ls -A "$tmp/cwd")" ] || fail "a keyword/value connection string created a file: $(ls -A "$tmp/cwd")"
python3 -c 'import json,sys; assert len(json.load(open(sys.argv[1]))) == 1' "$tmp/kv.json" || fail "keyword/value connection string read nothing"
# A role that may only read (a login node's history list) opens an up-to-date history without migrating.
"${as_pg[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U ff -d postgres -qAtc \
  "CREATE ROLE reader LOGIN; GRANT SELECT ON diagnoses, firstfault_meta TO reader; REVOKE CREATE ON SCHEMA public FROM PUBLIC;" >/dev/null
"$BIN" history list --history "postgresql://reader@127.0.0.1:$port/postgres" --format json --limit 3 >"$tmp/ro.json" 2>"$tmp/ro.err" ||
  fail "a read-only role cannot list the history: $(cat "$tmp/ro.err")"
python3 -c 'import json,sys; assert len(json.load(open(sys.argv[1]))) == 3' "$tmp/ro.json" || fail "a read-only role listed no rows"
echo "postgres_test: all passed (8 concurrent first opens, shared host salt, recurrences, stats, show, redaction, action columns, migration from schema 1)"
