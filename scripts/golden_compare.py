"""Compare two scripts/golden_outputs.sh output folders: exact, except the 4-parameter logistic fit.

    python3 scripts/golden_compare.py /tmp/golden/before /tmp/golden/after

Every file must be byte-identical, except JSON values under a key containing "plcc_logistic":
scipy's curve_fit (analysis.science.correlation._logistic_plcc) stops within its tolerance
(~1.5e-8) at a point that depends on the order of the rows it is given, and that order is not
fixed run to run (the same tree, run twice, gave 0.5524091019053997 and 0.552409102234353 for
ImagenHub_Mask-Guided_IE's plcc_logistic_fisher_mean). Those compare with a relative tolerance
of 1e-6. Exit 0 when equal, 1 with the list of differences otherwise. log/ is skipped.
"""

import json
import math
import sys
from pathlib import Path

REL_TOL = 1e-6


def walk(a, b, path, loose, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append(f"{path}.{key}: only in {'after' if key not in a else 'before'}")
                continue
            walk(a[key], b[key], f"{path}.{key}", loose or "plcc_logistic" in key, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: list length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}[{i}]", loose, out)
    elif loose and isinstance(a, float) and isinstance(b, float):
        if not math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12):
            out.append(f"{path}: {a!r} != {b!r} (beyond {REL_TOL:g})")
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: {a!r} != {b!r}")


def main(left: Path, right: Path) -> int:
    files = lambda root: {p.relative_to(root) for p in root.rglob("*") if p.is_file() and p.relative_to(root).parts[0] != "log"}
    a_files, b_files = files(left), files(right)
    out = [f"only in {left}: {p}" for p in sorted(a_files - b_files)]
    out += [f"only in {right}: {p}" for p in sorted(b_files - a_files)]
    loose_equal = 0
    for rel in sorted(a_files & b_files):
        x, y = (left / rel).read_bytes(), (right / rel).read_bytes()
        if x == y:
            continue
        if rel.suffix == ".json":
            found = []
            walk(json.loads(x), json.loads(y), str(rel), False, found)
            out += found
            loose_equal += not found
        else:
            out.append(f"{rel}: differs")
    print(f"{len(a_files & b_files)} files compared; {loose_equal} equal only within the logistic-fit tolerance")
    print("\n".join(out) if out else "no difference")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
