#!/usr/bin/env bash
# Check summary directories with a real MindInsight 2.3.1 through its REST API.
#
# Usage: tools/mindinsight_check.sh SUMMARY_BASE_DIR [PORT]
#
#   SUMMARY_BASE_DIR  folder holding run folders (each with events.out.events.summary.<ts>.*_MS
#                     and/or *_lineage files). Summary files directly in the base dir become
#                     the run "./".
#   PORT              loopback port for MindInsight (default 18080; must be free).
#
# Environment:
#   MINDINSIGHT_VENV  virtualenv holding mindinsight==2.3.1 (default /opt/mi-venv)
#   MI_LOAD_TIMEOUT   seconds to wait for the train-job list to load (default 60)
#   MI_CACHE_TIMEOUT  seconds to wait for one run's detail cache (default 30)
#   MI_MAX_CHARS      cut each printed response to this many characters (default 0 = no cut)
#   MI_KEEP_WORKSPACE 1 keeps MindInsight's workspace (logs) instead of deleting it
#
# Prints one "### <label>" line followed by the JSON body for each query:
# train-jobs, plugins/single-job per run, landscape intervals and landscapes (interval + final),
# scalar metadata, histograms, graph nodes (when a graph exists), lineages (with the body
# MindInsight's lineage page sends), dataset graph, the lineage page's optimisation targets.
# Exit status: 0 all queries answered without an error_code, 1 some query failed,
# 2 setup/start/load failure. MindInsight is stopped on exit (trap).
set -u -o pipefail

BASE_DIR=${1:-}
PORT=${2:-18080}
VENV=${MINDINSIGHT_VENV:-/opt/mi-venv}
LOAD_TIMEOUT=${MI_LOAD_TIMEOUT:-60}
CACHE_TIMEOUT=${MI_CACHE_TIMEOUT:-30}
MAX_CHARS=${MI_MAX_CHARS:-0}

die() { echo "mindinsight_check: $*" >&2; exit 2; }

[ -n "$BASE_DIR" ] || die "usage: $0 SUMMARY_BASE_DIR [PORT]"
[ -d "$BASE_DIR" ] || die "not a directory: $BASE_DIR"
BASE_DIR=$(cd "$BASE_DIR" && pwd -P)
[[ "$PORT" =~ ^[0-9]+$ ]] || die "bad port: $PORT"
[ -x "$VENV/bin/mindinsight" ] || die "no mindinsight in $VENV (set MINDINSIGHT_VENV)"
[ -x "$VENV/bin/gunicorn" ] || die "no gunicorn in $VENV"
command -v curl >/dev/null || die "curl not found"

export PATH="$VENV/bin:$PATH"      # mindinsight start runs gunicorn from PATH
PY="$VENV/bin/python"
URL="http://127.0.0.1:$PORT/v1/mindinsight"

if curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/"; then
    die "port $PORT already answers; pick another port"
fi

WORKSPACE=$(mktemp -d /tmp/mindinsight_ws.XXXXXX)
STARTED=0
cleanup() {
    local rc=$?
    if [ "$STARTED" = 1 ]; then
        (cd /tmp && timeout 30 "$VENV/bin/mindinsight" stop --port "$PORT" >/dev/null 2>&1) \
            || echo "mindinsight_check: 'mindinsight stop --port $PORT' failed" >&2
    fi
    if [ "${MI_KEEP_WORKSPACE:-0}" = 1 ] || [ "$rc" = 2 ]; then
        echo "mindinsight_check: MindInsight logs kept in $WORKSPACE/log" >&2
    else
        rm -rf "$WORKSPACE"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 2' INT TERM HUP

FAILED=0
BODY_FILE="$WORKSPACE/body.json"

# get LABEL CURL_ARGS... : GET/POST, print the body, count failures.
query() {
    local label=$1; shift
    local code
    code=$(curl -s -g --max-time 30 -o "$BODY_FILE" -w '%{http_code}' "$@") || code="curl-failed"
    echo "### $label [HTTP $code]"
    if [ "$MAX_CHARS" -gt 0 ] 2>/dev/null; then
        head -c "$MAX_CHARS" "$BODY_FILE"; echo
    else
        cat "$BODY_FILE"; echo
    fi
    if [ "$code" != 200 ] || grep -q '"error_code"' "$BODY_FILE"; then
        FAILED=1
        return 1
    fi
    return 0
}

# Read a value from the JSON in $BODY_FILE with a python expression over `d`.
jget() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); exec(sys.argv[2])' "$BODY_FILE" "$1"; }

echo "mindinsight_check: starting MindInsight on 127.0.0.1:$PORT for $BASE_DIR" >&2
T0=$(date +%s)
STARTED=1
if ! (cd /tmp && timeout 90 mindinsight start --summary-base-dir "$BASE_DIR" --port "$PORT" \
        --workspace "$WORKSPACE" >"$WORKSPACE/start.out" 2>&1); then
    cat "$WORKSPACE/start.out" >&2
    die "mindinsight start failed"
fi

# Poll until the brief cache is loaded and lists at least one train job.
DEADLINE=$(( $(date +%s) + LOAD_TIMEOUT ))
LOADED=0
while [ "$(date +%s)" -lt "$DEADLINE" ]; do
    if curl -s --max-time 5 -o "$BODY_FILE" "$URL/datavisual/train-jobs?limit=999" \
        && jget 'sys.exit(0 if d.get("load_status")=="loaded" and d.get("total",0)>0 else 1)' 2>/dev/null; then
        LOADED=1; break
    fi
    sleep 1
done
[ "$LOADED" = 1 ] || { { cat "$BODY_FILE"; echo; } >&2 2>/dev/null; die "no train job loaded within ${LOAD_TIMEOUT}s"; }
echo "mindinsight_check: train jobs listed after $(( $(date +%s) - T0 ))s" >&2

query "train-jobs" "$URL/datavisual/train-jobs?limit=999"
mapfile -t TRAIN_IDS < <(jget 'print("\n".join(j["train_id"] for j in d["train_jobs"]))')

for TID in "${TRAIN_IDS[@]}"; do
    curl -s --max-time 5 -o "$BODY_FILE" --get --data-urlencode "train_id=$TID" \
        "$URL/datavisual/train-jobs" || true
    NFILES=$(jget 'j=d["train_jobs"][0]; print(j.get("summary_files",0)+j.get("graph_files",0))' 2>/dev/null || echo "?")
    if [ "$NFILES" = 0 ]; then
        echo "### note $TID: no summary/graph file (lineage only?), skipping datavisual queries"
        continue
    fi
    # manual_update=true puts the run into the detail cache; wait until it is CACHED.
    curl -s -o /dev/null --max-time 10 --get --data-urlencode "train_id=$TID" \
        --data-urlencode "manual_update=true" "$URL/datavisual/plugins"
    DEADLINE=$(( $(date +%s) + CACHE_TIMEOUT ))
    STATUS=
    while [ "$(date +%s)" -lt "$DEADLINE" ]; do
        curl -s --max-time 5 -o "$BODY_FILE" --get --data-urlencode "train_id=$TID" \
            "$URL/datavisual/train-jobs" || true
        STATUS=$(jget 'print(d["train_jobs"][0]["cache_status"])' 2>/dev/null || echo "?")
        [ "$STATUS" = CACHED ] && break
        sleep 1
    done
    [ "$STATUS" = CACHED ] || { echo "mindinsight_check: $TID not CACHED (status $STATUS)" >&2; FAILED=1; }

    query "plugins $TID" --get --data-urlencode "train_id=$TID" --data-urlencode "manual_update=true" \
        "$URL/datavisual/plugins" || continue
    PLUGIN_JSON=$(cat "$BODY_FILE")
    tags() {  # tags PLUGIN -> one tag a line
        printf '%s' "$PLUGIN_JSON" > "$BODY_FILE"
        jget "print('\n'.join(d['plugins'].get('$1', [])))"
    }
    mapfile -t SCALAR_TAGS < <(tags scalar)
    mapfile -t HIST_TAGS < <(tags histogram)
    mapfile -t LAND_TAGS < <(tags loss_landscape)
    mapfile -t GRAPH_TAGS < <(tags graph)

    for TAG in "${SCALAR_TAGS[@]}"; do
        [ -n "$TAG" ] || continue
        query "scalar/metadata $TID $TAG" --get --data-urlencode "train_id=$TID" \
            --data-urlencode "tag=$TAG" "$URL/datavisual/scalar/metadata"
    done
    for TAG in "${HIST_TAGS[@]}"; do
        [ -n "$TAG" ] || continue
        query "histograms $TID $TAG" --get --data-urlencode "train_id=$TID" \
            --data-urlencode "tag=$TAG" "$URL/datavisual/histograms"
    done
    for TAG in "${GRAPH_TAGS[@]}"; do
        [ -n "$TAG" ] || continue
        query "graphs/nodes $TID $TAG" --get --data-urlencode "train_id=$TID" \
            --data-urlencode "tag=$TAG" "$URL/datavisual/graphs/nodes"
    done
    if [ -n "${LAND_TAGS[0]:-}" ]; then
        if query "landscape/intervals $TID" --get --data-urlencode "train_id=$TID" \
            "$URL/datavisual/landscape/intervals"; then
            mapfile -t INTERVAL_IDS < <(jget 'print("\n".join(str(i["id"]) for i in d.get("intervals", [])))')
            for IID in "${INTERVAL_IDS[@]}"; do
                [ -n "$IID" ] || continue
                query "landscape/landscapes $TID interval $IID" --get --data-urlencode "train_id=$TID" \
                    --data-urlencode "type=interval" --data-urlencode "interval_id=$IID" \
                    "$URL/datavisual/landscape/landscapes"
            done
        fi
        # "final" = a landscape whose loss_path.intervals is empty (MindSpore tags it landscape_[N]).
        # A run without one answers {"landscapes":[{"error_code":...}]}: noted, not a failure.
        PREV_FAILED=$FAILED
        if ! query "landscape/landscapes $TID final" --get --data-urlencode "train_id=$TID" \
            --data-urlencode "type=final" "$URL/datavisual/landscape/landscapes" \
            && grep -q '^{"landscapes":\[{"error_code"' "$BODY_FILE"; then
            FAILED=$PREV_FAILED
            echo "### note $TID: no final landscape"
        fi
    fi
done

# The body MindInsight's model-lineage page sends (its table lists model lineages).
query "lineagemgr/lineages" -X POST -H 'Content-Type: application/json' \
    -d '{"lineage_type": {"in": ["model"]}}' "$URL/lineagemgr/lineages"
mapfile -t LINEAGE_IDS < <(jget 'print("\n".join(o["summary_dir"] for o in d.get("object", [])))' 2>/dev/null)
for TID in "${LINEAGE_IDS[@]}"; do
    [ -n "$TID" ] || continue
    query "datasets/dataset_graph $TID" --get --data-urlencode "train_id=$TID" "$URL/datasets/dataset_graph"
done
# The lineage page's optimisation panels (hyper-parameter importance): HTTP 500 with pandas >= 2.
query "optimizer/targets/search" -X POST -H 'Content-Type: application/json' -d '{}' \
    "$URL/optimizer/targets/search"

echo "mindinsight_check: done in $(( $(date +%s) - T0 ))s, failed=$FAILED" >&2
exit "$FAILED"
