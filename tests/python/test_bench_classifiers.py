"""bench/classifiers.py's step runner: a step the --budget's end stops is reported as such, not as a slow step."""

import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_classifiers", ROOT / "bench" / "classifiers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_budget_end_and_own_limit_are_told_apart(tmp_path):
    bench = load_bench()
    sleep = [sys.executable, "-c", "import time; time.sleep(30)"]
    entry = {"model": "m", "errors": [], "steps": {}}
    assert not bench.run_step(entry, tmp_path, "cut", sleep, 60, time.time() + 2)
    assert not bench.run_step(entry, tmp_path, "own", sleep, 1, time.time() + 60)
    assert not bench.run_step(entry, tmp_path, "late", sleep, 60, time.time() + 0.5)
    assert bench.run_step(entry, tmp_path, "quick", [sys.executable, "-c", "pass"], 60, None)
    cut, own, late = entry["errors"]
    assert cut.startswith("cut: stopped at the --budget's end after 2 s"), cut
    assert own.startswith("own: timed out after 1 s"), own
    assert late == "late: not run: --budget spent"
    assert entry["steps"]["quick"]["rc"] == 0
