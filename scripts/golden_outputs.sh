#!/usr/bin/env bash
# Golden output of a tree, to prove a refactor changed no number (issue #15).
#
#   scripts/golden_outputs.sh <tree> <outdir>   e.g. scripts/golden_outputs.sh ../wt-before /tmp/golden/before
#   python3 scripts/golden_compare.py /tmp/golden/before /tmp/golden/after
# (diff -r -x log works too, but shows the logistic fit's run-to-run noise: see golden_compare.py)
#
# In a fresh SQLite database and fresh media/export/celery folders (nothing of the tree's own
# db.sqlite3 or media is read or written), it migrates, builds the demo (fixed seed), imports the
# real datasets as the README says (ImagenHub, VIEScore's copy, its GPT-4o 0-shot judge and the
# automatic metrics, EvalMi-50K in full) and a seeded synthetic EvalMi ratings file
# (golden-evalmi-sim: the only EvalMi study with human ratings; pairwise has none), then writes
#   <outdir>/report/<slug>.json     `manage.py report <slug> --json` of every study (n_boot and seed:
#                                   the CLI defaults, 1000 and 0), normalised (see below)
#   <outdir>/export/<slug>/...      the dataset zip of one study per protocol, fetched through the
#                                   stable URL /research/<slug>/export.zip as a superuser, unpacked;
#                                   Parquet and xlsx members are also written as sorted-key CSV text
#   <outdir>/studies.tsv            slug, protocol, task type, item/rating counts
#   <outdir>/log/*.txt              the commands' output (not compared: `diff -r -x log`)
# Only URLs, management commands and model tables are used, never module paths, so the script
# runs unchanged on the tree before and after a reorganisation.
#
# Normalisation (the only things removed, because they change from run to run):
#   - JSON keys whose value is a wall-clock time: any key named in TIME_KEYS below
#     (created_at, updated_at, generated_at, exported_at, started_at, finished_at, submitted_at,
#     decided_at, imported_at, date_joined, last_login) at any depth of report.json / JSON members;
#   - the same columns in CSV / JSONL / Parquet / xlsx members of the export;
#   - the datasheet's (README.md member) "exported <ISO time>" stamp;
#   - database ids are kept (a fresh database gives the same ids for the same steps).
# Environment: GOLDEN_N_BOOT (default: the CLI default) to make a quick run; GOLDEN_KEEP=1;
# GOLDEN_PYTHON (default <tree>/.venv/bin/python) the interpreter with the site's requirements.
set -euo pipefail

TREE=$(cd "$1" && pwd)
OUT=$2
DATASETS=${DATASETS:-}
[ -d "$DATASETS" ] || DATASETS=$(cd "$TREE/../shared/datasets" 2>/dev/null && pwd || echo ../shared/datasets)
PY=${GOLDEN_PYTHON:-$TREE/.venv/bin/python}
[ -x "$PY" ] || PY=python3
"$PY" -c "import django, django_htmx, pandas" || { echo "[golden] $PY cannot run the site (set GOLDEN_PYTHON)"; exit 2; }

SCRATCH=$(mktemp -d /tmp/golden.XXXXXX)
# GOLDEN_KEEP=1 keeps the database and media (path printed) to re-run one report by hand.
[ "${GOLDEN_KEEP:-}" = 1 ] || trap 'rm -rf "$SCRATCH"' EXIT
export DATABASE_URL="sqlite:///$SCRATCH/db.sqlite3"
export MEDIA_ROOT="$SCRATCH/media" EXPORTS_ROOT="$SCRATCH/exports" CELERY_FILESYSTEM_DIR="$SCRATCH/celery"
export EXPORT_INLINE_MAX_VOTES=100000000 DEBUG=true PYTHONHASHSEED=0 TZ=UTC
unset CELERY_BROKER_URL CELERY_RESULT_BACKEND CACHE_URL || true

rm -rf "$OUT"
mkdir -p "$OUT/report" "$OUT/export" "$OUT/log"
cd "$TREE"
M() { "$PY" manage.py "$@"; }

echo "[golden] $TREE @ $(git -C "$TREE" rev-parse --short HEAD) -> $OUT (db $DATABASE_URL)"
M migrate --noinput >"$OUT/log/migrate.txt" 2>&1
M build_demo >"$OUT/log/build_demo.txt" 2>&1
D=$DATASETS
{
  M import_imagenhub "$D/imagenhub/human_ratings"
  M import_imagenhub "$D/viescore/human_ratings"
  M import_judge "$D/viescore/gpt4o_0shot" --format viescore --judge gpt4o-0shot
  M import_judge "$D/viescore/autometrics" --format autometrics
  M import_evalmi "$D/evalmi/AIGI2025_MOS_yn.xlsx" --questions "$D/evalmi/question.xlsx" \
    --tasks "$D/evalmi/prompt_tasks.jsonl" --study evalmi-50k
  # EvalMi-50K publishes MOS only, the demo has no ratings: a seeded synthetic EvalMi study gives
  # the EvalMi protocol human ratings to report and export (40 prompts x 4 models x 6 raters).
  "$PY" - "$SCRATCH/golden-evalmi-ratings.csv" <<'GENEOF'
import csv, random, sys
rng = random.Random(20251124)
models = {"model-a": 0.8, "model-b": 0.3, "model-c": -0.2, "model-d": -0.7}
raters = {f"rater-{i}": rng.gauss(0, 0.4) for i in range(1, 7)}
with open(sys.argv[1], "w", newline="") as fh:
    out = csv.writer(fh)
    out.writerow(["study", "item", "model", "rater", "dimension", "value", "prompt"])
    for p in range(1, 41):
        difficulty = rng.gauss(0, 0.5)
        for model, effect in models.items():
            for rater, bias in raters.items():
                for dimension in ("perception", "correspondence"):
                    score = 3 + effect - difficulty + bias + rng.gauss(0, 0.8)
                    out.writerow(["golden-evalmi-sim", f"p{p:03d}-{model}", model, rater, dimension,
                                  min(5, max(1, round(score))), f"prompt number {p}"])
GENEOF
  M import_ratings "$SCRATCH/golden-evalmi-ratings.csv" --protocol evalmi --task-type text_to_image
} >"$OUT/log/imports.txt" 2>&1

cat >"$SCRATCH/golden_py.py" <<'PYEOF'
"""Study list, the reports' and exports' normalisation (run through `manage.py shell`)."""
import csv
import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
from django.apps import apps
from django.contrib.auth import get_user_model
from django.test import Client

OUT = Path(os.environ["GOLDEN_OUT"])
PY = os.environ["GOLDEN_PY"]
TIME_KEYS = {"created_at", "updated_at", "generated_at", "exported_at", "started_at", "finished_at",
             "submitted_at", "decided_at", "imported_at", "date_joined", "last_login"}


def scrub(value):
    if isinstance(value, dict):
        return {k: ("<time>" if k in TIME_KEYS else scrub(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def write_json(path: Path, document) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(scrub(document), indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def frame_text(frame: pd.DataFrame) -> str:
    for column in frame.columns:
        if column in TIME_KEYS:
            frame[column] = "<time>"
    return frame.to_csv(index=False, lineterminator="\n")


Study = apps.get_model("tasks", "Study")
Rating = apps.get_model("tasks", "Rating")
Item = apps.get_model("tasks", "Item")
studies = list(Study.objects.order_by("slug"))
with open(OUT / "studies.tsv", "w") as fh:
    fh.write("slug\tprotocol\ttask_type\titems\tratings\n")
    for s in studies:
        ratings = Rating.objects.filter(study=s).count()
        fh.write(f"{s.slug}\t{s.protocol}\t{getattr(s, 'task_type', '')}\t{Item.objects.filter(study=s).count()}\t{ratings}\n")

n_boot = os.environ.get("GOLDEN_N_BOOT")
for s in studies:
    cmd = [PY, "manage.py", "report", s.slug, "--json"] + (["--n-boot", n_boot] if n_boot else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        (OUT / "report" / f"{s.slug}.error.txt").write_text(done.stdout + done.stderr)
        print(f"[golden] report {s.slug}: exit {done.returncode}", file=sys.stderr)
        continue
    write_json(OUT / "report" / f"{s.slug}.json", json.loads(done.stdout))
    print(f"[golden] report {s.slug}", file=sys.stderr)

# One study per protocol for the export: the demo's first (then any) study of that protocol.
chosen = {}
for s in sorted(studies, key=lambda s: (not s.slug.startswith("demo-"), s.slug)):
    chosen.setdefault(s.protocol, s)
# ...and the real datasets' studies of the two published protocols.
for slug in ("ImagenHub_Text-Guided_IE", "evalmi-50k", "golden-evalmi-sim"):
    s = Study.objects.filter(slug=slug).first()
    if s:
        chosen[f"{s.protocol}-{slug}"] = s
User = get_user_model()
admin, _ = User.objects.get_or_create(username="golden-admin", defaults={"is_staff": True, "is_superuser": True})
client = Client()
client.force_login(admin)
for s in chosen.values():
    response = client.get(f"/research/{s.slug}/export.zip")
    target = OUT / "export" / s.slug
    target.mkdir(parents=True, exist_ok=True)
    if response.status_code != 200:
        (target / "status.txt").write_text(f"{response.status_code}\n{response.get('Location', '')}\n")
        continue
    body = b"".join(response.streaming_content) if response.streaming else response.content
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        (target / "members.txt").write_text("".join(f"{i.filename}\n" for i in archive.infolist()))
        for info in archive.infolist():
            data = archive.read(info)
            name = info.filename
            dest = target / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if name.endswith(".json"):
                write_json(dest, json.loads(data))
            elif name.endswith(".jsonl"):
                lines = [json.dumps(scrub(json.loads(line)), sort_keys=True, ensure_ascii=False)
                         for line in data.decode().splitlines() if line.strip()]
                dest.write_text("\n".join(lines) + "\n")
            elif name.endswith(".csv"):
                dest.write_text(frame_text(pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)))
            elif name.endswith(".parquet"):
                dest.with_suffix(".parquet.csv").write_text(frame_text(pd.read_parquet(io.BytesIO(data))))
                table_schema = __import__("pyarrow.parquet", fromlist=["x"]).read_schema(io.BytesIO(data))
                dest.with_suffix(".parquet.schema").write_text(str(table_schema.remove_metadata()) + "\n")
            elif name.endswith(".xlsx"):
                sheets = pd.read_excel(io.BytesIO(data), sheet_name=None, dtype=str)
                dest.with_suffix(".xlsx.csv").write_text(
                    "".join(f"## sheet {k}\n{frame_text(v.fillna(''))}" for k, v in sheets.items()))
            elif name.endswith(".md"):
                # the datasheet's "exported <ISO time>." line
                dest.write_text(re.sub(r"exported \d{4}-\d\d-\d\dT[0-9:.+-]+", "exported <time>", data.decode()))
            else:
                dest.write_bytes(data)
    print(f"[golden] export {s.slug}: {len(body)} bytes", file=sys.stderr)
PYEOF
GOLDEN_OUT="$OUT" GOLDEN_PY="$PY" "$PY" manage.py shell -c "exec(open('$SCRATCH/golden_py.py').read())" \
  2>"$OUT/log/golden_py.txt"
errors=$(find "$OUT" -name '*.error.txt' -o -name status.txt | wc -l)
echo "[golden] done: $(ls "$OUT/report" | wc -l) report files, $(ls "$OUT/export" | wc -l) exports, $errors errors"
[ "$errors" -eq 0 ]
