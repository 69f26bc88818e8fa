"""Bundled demo data for `triage --demo` and `triage fix --demo`: a failed GLM-5 launch on an SM120
server and a recorded probe snapshot of that server. Paths are os.path strings: the headless report
imports no pathlib."""

import os

DEMO_DIR = os.path.dirname(__file__)
DEMO_LOG = os.path.join(DEMO_DIR, "glm5_sm120.log")
DEMO_SNAPSHOT = os.path.join(DEMO_DIR, "snapshot_rtxpro6000.json")
