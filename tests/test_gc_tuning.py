"""The server's garbage-collector settings (run in a child: freezing is process-wide)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ferrymq.server.gc_tuning import GC_THRESHOLDS

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import gc, json
from ferrymq.server.gc_tuning import tune_gc
before = gc.get_freeze_count()
tune_gc()
young = [[i] for i in range(1000)]  # allocated after: not frozen, collected normally
print(json.dumps({"before": before, "frozen": gc.get_freeze_count(), "thresholds": gc.get_threshold(),
                  "young_tracked": all(gc.is_tracked(x) for x in young)}))
"""


def test_tune_gc_freezes_start_up_objects_and_raises_thresholds():
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    facts = json.loads(out.stdout)
    assert facts["before"] == 0
    assert facts["frozen"] > 1000  # the modules and objects start-up made
    assert tuple(facts["thresholds"]) == GC_THRESHOLDS
    assert GC_THRESHOLDS[0] > 700  # above CPython's default gen-0 threshold
    assert facts["young_tracked"]
