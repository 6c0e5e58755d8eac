"""Wall time of `personalign --help` vs `python -c "import dspy"` (target ratio <= 0.25).

Runs are interleaved (help, import, help, import, ...) so machine noise hits both alike; the
ratio is of medians. Usage: python benchmarks/startup.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from _common import ROOT, emit


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    exe = sys.executable
    cli = [exe, "-m", "personalign", "--help"]
    imp = [exe, "-c", "import dspy"]
    timed(cli), timed(imp)  # warm the file cache
    help_s, import_s = [], []
    for _ in range(args.repeats):
        help_s.append(timed(cli))
        import_s.append(timed(imp))
    # what --help imported: must not include the heavy stacks
    probe = subprocess.run([exe, "-c", "import sys; sys.argv=['personalign','--help']\n"
                            "from personalign.cli import main\n"
                            "try:\n main()\nexcept SystemExit: pass\n"
                            "print(','.join(m for m in ('dspy','litellm','torch','llama_cpp','mlflow','sentence_transformers') if m in sys.modules), file=sys.stderr)"],
                           capture_output=True, text=True, cwd=ROOT)
    heavy = [m for m in probe.stderr.strip().splitlines()[-1].split(",") if m] if probe.stderr.strip() else []
    h, i = statistics.median(help_s), statistics.median(import_s)
    emit({"benchmark": "startup", "repeats": args.repeats, "help_median_s": round(h, 4),
          "import_dspy_median_s": round(i, 4), "ratio": round(h / i, 4), "target_ratio_max": 0.25,
          "heavy_modules_imported_by_help": heavy})


if __name__ == "__main__":
    main()
