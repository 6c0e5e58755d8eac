#!/usr/bin/env bash
# Distributed sweep on loopback with real parts; prints ONE JSON object on stdout.
#
#   * Optuna storage: a PostgreSQL server started by this script from Debian's package
#     (/usr/lib/postgresql/*/bin, run as the `postgres` user when we are root), trust auth on
#     127.0.0.1, a throwaway data directory. Without PostgreSQL binaries (or without the psycopg2
#     driver) the JSON says "postgres": {"skipped": "<reason>"} and the journal file storage is
#     used instead, so the multi-worker path is still measured.
#   * Tracking: `mlflow server` on 127.0.0.1 (SQLite backend store in the temp dir).
#   * The LM: benchmarks/_mock_lm.py (200 ms per call; the workers are real `personalign sweep`
#     processes with the mock provider registered in-process).
#
# Measured: one worker alone on study A (baseline wall time), then two workers started together
# on study B with the same command; per worker the trials it ran; duplicates = trial numbers run
# by both workers + trials with more than one MLflow run + finished trials beyond the budget
# (target 0); total wall time of the two vs the one.
#
# Usage: benchmarks/distributed_sweep.sh [N_TRIALS=16] [LIMIT=8] [LATENCY_MS=200]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
MLFLOW="${MLFLOW:-$(dirname "$PY")/mlflow}"
N_TRIALS="${1:-16}"
LIMIT="${2:-8}"
LATENCY_MS="${3:-200}"
WORK="$(mktemp -d /tmp/personalign-dist-XXXXXX)"
chmod 755 "$WORK"
PG_BIN=""
PG_DATA="$WORK/pgdata"
PG_STARTED=0
MLFLOW_PID=""
PG_SKIP=""

as_pg() {  # run a PostgreSQL binary as the postgres user when we are root (postgres refuses root)
  if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cleanup() {
  if [ -n "$MLFLOW_PID" ]; then kill "$MLFLOW_PID" 2>/dev/null || true; wait "$MLFLOW_PID" 2>/dev/null || true; fi
  if [ "$PG_STARTED" = "1" ]; then as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null 2>&1 || true; fi
  if [ -z "${KEEP:-}" ]; then rm -rf "$WORK"; else echo "kept $WORK" >&2; fi
}
trap cleanup EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# --- PostgreSQL -----------------------------------------------------------------------------
for d in /usr/lib/postgresql/*/bin; do
  if [ -x "$d/postgres" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then PG_BIN="$d"; fi
done
if [ -z "$PG_BIN" ]; then
  PG_SKIP="no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
elif ! "$PY" -c 'import psycopg' 2>/dev/null; then
  PG_SKIP="the psycopg driver is not installed (pip install 'personalign[postgres]')"
elif [ "$(id -u)" = "0" ] && ! id postgres >/dev/null 2>&1; then
  PG_SKIP="running as root and there is no 'postgres' user to run the server as"
fi
if [ -z "$PG_SKIP" ]; then
  PG_PORT="$(free_port)"
  mkdir -p "$PG_DATA"
  if [ "$(id -u)" = "0" ]; then chown postgres "$PG_DATA" "$WORK"; fi
  if as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 >"$WORK/initdb.log" 2>&1 \
     && as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$WORK/pg.log" -w -t 60 \
          -o "-h 127.0.0.1 -p $PG_PORT -k $WORK -c fsync=on -c max_connections=50" start >/dev/null 2>&1; then
    PG_STARTED=1
    as_pg "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres optuna
    STORAGE="postgresql://postgres@127.0.0.1:$PG_PORT/optuna"
    PG_VERSION="$("$PG_BIN/postgres" --version)"
  else
    PG_SKIP="PostgreSQL failed to start: $(tail -n 3 "$WORK/pg.log" "$WORK/initdb.log" 2>/dev/null | tr '\n"' ' ' | cut -c1-300)"
  fi
fi
if [ -n "$PG_SKIP" ]; then
  STORAGE="journal:$WORK/optuna.journal"
  PG_VERSION=""
fi

# --- mlflow server (litellm, which MLflow imports, must not fetch its cost map from the network) ---
export LITELLM_LOCAL_MODEL_COST_MAP=True
# --------------------------------------------------------------------------
ML_PORT="$(free_port)"
"$MLFLOW" server --host 127.0.0.1 --port "$ML_PORT" --backend-store-uri "sqlite:///$WORK/mlflow.db" \
  --artifacts-destination "$WORK/mlartifacts" >"$WORK/mlflow.log" 2>&1 &
MLFLOW_PID=$!
TRACKING="http://127.0.0.1:$ML_PORT"
for _ in $(seq 1 240); do
  if "$PY" -c "import urllib.request,sys; urllib.request.urlopen('$TRACKING/health', timeout=2)" 2>/dev/null; then break; fi
  if ! kill -0 "$MLFLOW_PID" 2>/dev/null; then echo "{\"benchmark\": \"distributed_sweep\", \"error\": \"mlflow server died: $(tail -n 2 "$WORK/mlflow.log" | tr '\n"' ' ')\"}"; exit 1; fi
  sleep 0.5
done

# --- workers --------------------------------------------------------------------------------
cat >"$WORK/space.toml" <<'EOF'
strategies = ["zero-shot", "criteria"]
[evaluation]
minibatch_size = 4
[pruner]
kind = "none"
[lm]
temperature = { low = 0.0, high = 1.0 }
optimizer = ["none", "labeled"]
[optimizer.labeled]
k = { low = 0, high = 4 }
EOF
export PERSONALIGN_RUNS_DIR="$WORK/runs"
worker() {  # worker STUDY LOGNAME SEED
  "$PY" "$ROOT/benchmarks/_mock_lm.py" sweep relevance --data "$ROOT/examples/relevance_demo.jsonl" \
    --space "$WORK/space.toml" --n-trials "$N_TRIALS" --limit "$LIMIT" --lm "mock/relevance-${LATENCY_MS}ms" \
    --storage "$STORAGE" --study-name "$1" --tracking-uri "$TRACKING" --no-cache --n-boot 200 --no-export \
    --seed "$3" --json >"$WORK/$2.out" 2>"$WORK/$2.err"
}
now() { "$PY" -c 'import time; print(time.time())'; }

# warm-up (imports compiled and cached, MLflow experiment created): a 1-trial study not measured
"$PY" "$ROOT/benchmarks/_mock_lm.py" sweep relevance --data "$ROOT/examples/relevance_demo.jsonl" \
  --space "$WORK/space.toml" --n-trials 1 --limit 1 --lm "mock/relevance-0ms" --storage "$STORAGE" \
  --study-name warm-up --tracking-uri "$TRACKING" --no-cache --no-export --json >/dev/null 2>"$WORK/warm.err" || true
RC_ONE=0
T0="$(now)"; worker dist-one one 0 || RC_ONE=$?; T1="$(now)"
worker dist-two w0 0 & P0=$!
worker dist-two w1 1 & P1=$!
RC0=0; RC1=0; wait "$P0" || RC0=$?; wait "$P1" || RC1=$?
T2="$(now)"

# --- report -------------------------------------------------------------------------------
"$PY" - "$WORK" "$STORAGE" "$TRACKING" "$N_TRIALS" "$T0" "$T1" "$T2" "$RC0" "$RC1" "$PG_SKIP" "$PG_VERSION" "$LATENCY_MS" "$LIMIT" <<'EOF'
import json, sys, os
from collections import Counter
from pathlib import Path

work, storage, tracking, n, t0, t1, t2, rc0, rc1, pg_skip, pg_version, latency, limit = sys.argv[1:]
n, t0, t1, t2 = int(n), float(t0), float(t1), float(t2)
import optuna, mlflow
from optuna.trial import TrialState
from personalign.sweeps import open_storage, redact_url

optuna.logging.set_verbosity(optuna.logging.ERROR)
outs = {}
for name in ("one", "w0", "w1"):
    text = (Path(work) / f"{name}.out").read_text().strip() if (Path(work) / f"{name}.out").exists() else ""
    outs[name] = json.loads(text.splitlines()[-1]) if text else None
errs = {name: (Path(work) / f"{name}.err").read_text() for name in ("one", "w0", "w1")}
failed = {name: errs[name].strip().splitlines()[-1][:300] for name in outs if outs[name] is None and errs[name].strip()}
if outs["one"] is None or (outs["w0"] is None and outs["w1"] is None):
    print(json.dumps({"benchmark": "distributed_sweep", "error": "a worker failed", "workers": failed,
                      "storage": redact_url(storage).replace(work, "$TMP"), "postgres": {"version": pg_version} if not pg_skip else {"skipped": pg_skip}}))
    sys.exit(1)
st = open_storage(storage)
client = mlflow.MlflowClient(tracking_uri=tracking)
exp = client.get_experiment_by_name("personalign")

def study_facts(name):
    study = optuna.load_study(study_name=name, storage=st)
    trials = study.get_trials(deepcopy=False)
    states = Counter(t.state.name for t in trials)
    # the trials the budget counts: a trial that reused a finished trial's value (same_as) is not one
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED) and "same_as" not in t.user_attrs]
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`personalign.study` = '{name}' and tags.command = 'sweep-trial'", max_results=5000)
    per_trial = Counter(r.data.tags["personalign.trial"] for r in runs)
    return study, trials, states, finished, runs, per_trial


def span(trials):
    """Seconds from the first trial's start to the last trial's end (start-up excluded)."""
    done = [t for t in trials if t.datetime_start and t.datetime_complete]
    return (max(t.datetime_complete for t in done) - min(t.datetime_start for t in done)).total_seconds() if done else None

_, trials1, states1, finished1, runs1, _ = study_facts("dist-one")
_, trials2, states2, finished2, runs2, per_trial2 = study_facts("dist-two")
ran = {w: set((outs[w] or {}).get("ran_trials", [])) for w in ("w0", "w1")}
surplus = [t.number for t in trials2 if t.user_attrs.get("surplus")]
def pid_of(worker):  # host|boot|pid_ns|pid|ticks|token (older: host|boot|pid|ticks)
    parts = worker.split("|")
    return parts[3] if len(parts) == 6 else parts[2] if len(parts) > 2 else "?"
by_worker = Counter(pid_of(t.system_attrs.get("personalign:worker", "?")) for t in finished2)
distinct2 = len({json.dumps(t.params, sort_keys=True) for t in finished2})
dup_both = sorted(ran["w0"] & ran["w1"])
dup_runs = sorted(k for k, v in per_trial2.items() if v > 1)
over_budget = max(0, len(finished2) - n)
wall1, wall2 = t1 - t0, t2 - t1
result = {
    "benchmark": "distributed_sweep",
    "storage": redact_url(storage).replace(work, "$TMP"),
    "postgres": {"version": pg_version} if not pg_skip else {"skipped": pg_skip, "fallback": "journal file storage"},
    "tracking_uri": "mlflow server on " + tracking,
    "n_trials": n, "lm": f"mock, {latency} ms per call, {limit} calls per trial",
    "one_worker": {"wall_seconds": round(wall1, 2), "trials_span_seconds": round(span(trials1), 2), "finished": len(finished1), "states": dict(states1),
                   "mlflow_trial_runs": len(runs1), "exit_code": 0 if outs["one"] else 1},
    "two_workers": {
        "wall_seconds": round(wall2, 2), "trials_span_seconds": round(span(trials2), 2), "finished": len(finished2), "states": dict(states2),
        "trials_per_worker": {w: len(ran[w] - set(surplus)) for w in ("w0", "w1")},
        "finished_by_process": dict(by_worker), "surplus_claims": len(surplus),
        "distinct_configurations": distinct2, "seeds": [0, 1],
        "study_seed": optuna.load_study(study_name="dist-two", storage=st).user_attrs.get("seed"),
        "mlflow_trial_runs": len(runs2), "exit_codes": [int(rc0), int(rc1)],
        "lock_errors": sum(("locked" in e.lower()) or ("deadlock" in e.lower()) for e in errs.values()),
    },
    "duplicates": len(dup_both) + len(dup_runs) + over_budget,
    "duplicates_detail": {"run_by_both": dup_both, "trials_with_several_mlflow_runs": dup_runs,
                          "finished_beyond_budget": over_budget},
    "speedup_two_vs_one": round(wall1 / wall2, 2) if wall2 > 0 else None,
    "speedup_two_vs_one_trials_span": round(span(trials1) / span(trials2), 2),
    "note": "wall times include each worker's start-up (imports, MLflow/Optuna connections); the trials span "
            "runs from the first trial's start to the last trial's end",
    "load_average_1min": round(os.getloadavg()[0], 2), "cpu_count": os.cpu_count(),
}
print(json.dumps(result))
EOF
