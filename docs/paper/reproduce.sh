#!/usr/bin/env bash
# Regenerate everything in docs/paper/ from scratch with the platform itself.
#
#   docs/paper/reproduce.sh                 # ~35-45 min on 2 cores (see README.md)
#   PAPER_DIR=/data/paper DNNFRAME_WORKERS=8 docs/paper/reproduce.sh
#   DNNFRAME="python -m dnnframe.cli" PYTHON=python docs/paper/reproduce.sh   # no console script
#
#   REPORTS_ONLY=1 docs/paper/reproduce.sh  # only the reports, from the stores of a full run
#
# Stores (SQLite files) go to $PAPER_DIR (default /tmp/dnnframe-paper), outside the repo.
# Re-running resumes: trials already COMPLETE in the store are not trained again.
# The figures.html files (plotly.js inlined, about 5 MB each) are not kept in git: this
# script writes them with the reports; REPORTS_ONLY=1 rebuilds them in seconds.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${PAPER_DIR:-/tmp/dnnframe-paper}
WORKERS=${DNNFRAME_WORKERS:-2}
DNNFRAME=${DNNFRAME:-dnnframe}
unset DNNFRAME_BROKER_URL  # the sweeps run on local worker processes (LocalExecutor)
PYTHON=${PYTHON:-python}
mkdir -p "$OUT"
STORE="sqlite:///$OUT/paper.db"
if [ -n "${REPORTS_ONLY:-}" ]; then
  for db in paper long deep repro_a repro_b; do
    [ -f "$OUT/$db.db" ] || { echo "REPORTS_ONLY: no $OUT/$db.db (run without it first)" >&2; exit 1; }
  done
fi

sweeps() { [ -z "${REPORTS_ONLY:-}" ]; }  # false when only the reports are asked for

if sweeps; then

# RQ1/RQ2: depth sweeps, the three small datasets first, digits last.
for spec in rq1_2015_plain rq1_modern_relu_he rq1_modern_relu_he_residual rq1_modern_tanh_residual \
            rq1_modern_selu rq1_digits_2015_plain rq1_digits_modern_relu_he \
            rq1_digits_modern_relu_he_residual rq1_digits_modern_tanh_residual rq1_digits_modern_selu; do
  echo "$(date -u +%H:%M:%S) run $spec"
  $DNNFRAME run "experiments/paper/$spec.yaml" --store "$STORE" --workers "$WORKERS" -q --json \
    > "$OUT/$spec.json" || echo "$spec: exit $? (see $OUT/$spec.json)"
done

# RQ2 control: the deep plain stacks trained 5x longer without early stopping (own store).
for spec in rq2_long_2015_tanh rq2_long_modern_selu; do
  echo "$(date -u +%H:%M:%S) run $spec"
  $DNNFRAME run "experiments/paper/$spec.yaml" --store "sqlite:///$OUT/long.db" --workers "$WORKERS" -q --json \
    > "$OUT/$spec.json" || echo "$spec: exit $? (see $OUT/$spec.json)"
done

# RQ2 again: designs made for depth (ReZero; pre-norm layer norm with 1/sqrt(depth) branches;
# ReZero trained the whole schedule, reporting the best validation-accuracy epoch; ReZero with
# pre-norm layer norm and dropout 0.1 on its branches).
for spec in rq2_rezero rq2_preln_scaled rq2_rezero_valacc rq2_rezero_preln_dropout; do
  echo "$(date -u +%H:%M:%S) run $spec"
  $DNNFRAME run "experiments/paper/$spec.yaml" --store "sqlite:///$OUT/deep.db" --workers "$WORKERS" -q --json \
    > "$OUT/$spec.json" || echo "$spec: exit $? (see $OUT/$spec.json)"
done

# RQ5: the same spec twice, into two stores, with 2 and with 1 worker.
$DNNFRAME run experiments/paper/rq5_repro.yaml --store "sqlite:///$OUT/repro_a.db" --workers 2 -q --json > "$OUT/repro_a.json"
$DNNFRAME run experiments/paper/rq5_repro.yaml --store "sqlite:///$OUT/repro_b.db" --workers 1 -q --json > "$OUT/repro_b.json"

fi

# The report: report.md, summary.json, figures.html (+ PNGs), repro.md, repro.json.
echo "$(date -u +%H:%M:%S) report"
$DNNFRAME paper-report docs/paper --store "$STORE" \
  --repro "sqlite:///$OUT/repro_a.db" "sqlite:///$OUT/repro_b.db"

$DNNFRAME paper-report docs/paper/long_training --store "sqlite:///$OUT/long.db"
# the earlier designs' curves (docs/paper/summary.json, just written) drawn dotted for comparison
$DNNFRAME paper-report docs/paper/deep_designs --store "sqlite:///$OUT/deep.db" --baseline docs/paper/summary.json

sweeps || exit 0
# RQ3/RQ4: throughput (needs RabbitMQ for the Celery part).
"$PYTHON" bench/throughput.py --json docs/paper/throughput.json | tee docs/paper/throughput.txt
# Compile time and epoch time vs depth, one fresh process per depth.
"$PYTHON" bench/engine.py --depths 2,10,100,250,500,700,1000 --width 16 --epochs 2 2>&1 \
  | grep -v Warn > docs/paper/compile_vs_depth.txt
echo "$(date -u +%H:%M:%S) done"
