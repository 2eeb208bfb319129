"""`tasq demo` as a new user runs it: one command, under a minute, showing what tasq is for.

Runs the real `tasq` entry point in a subprocess (its own devcluster, operator and webhooks) and
checks each thing the demo promises against what it printed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TASQ = Path(sys.executable).parent / "tasq"


def test_tasq_demo_shows_rack_placement_fallback_and_a_gang_waiting_then_running(tmp_path: Path) -> None:
    proc = subprocess.run([str(TASQ), "demo"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, f"{out}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    # a require-rack Job whose pods all land in one rack
    assert re.search(r"llm-pretrain-rack \(require rack\): 8 pods in 1 rack \(b\d-r\d\)", out)
    # a prefer Job falling back to a wider level: two racks, one block
    assert re.search(r"llm-finetune-prefer-rack \(prefer rack\): 9 pods .* 2 racks of block b\d", out)
    # the JobSet sample: a leader and 2 Jobs of 2 workers, one pod-set group, all in one rack
    assert re.search(r"rl-leader-workers \(JobSet: .*\): 5 pods in 1 rack \(b\d-r\d\)", out)
    # two gangs over the quota: the second suspended with zero pods and a quantitative reason
    assert "gang-b: suspended=true, pods created: 0" in out
    assert re.search(r'insufficient quota for nvidia.com/gpu in flavor "a100": requests 32, available 0', out)
    # ... then running once the first finished, within the minute
    finished = re.search(r"== after (\d+) s: gang-a finished", out)
    assert finished and int(finished.group(1)) < 60
    assert "gang-b: admitted, 4 pods running in rack b3-r" in out
    # the per-domain picture: blocks > racks > nodes with the Jobs on them
    assert re.search(r"^h100 block b1$", out, re.M) and re.search(r"^  rack b1-r\d: ", out, re.M)
    assert re.search(r"^    h100-b\d-r\d-n\d: ", out, re.M)
