"""Make screenshots/*.svg (and .png when rsvg-convert is installed) from the real app on the bundled
example (`triage --demo`: the GLM-5 log and the recorded 8x RTX PRO 6000 probe snapshot), at 120x36
and 80x24, one per view. As harlequin's export_screenshots: run_test(size=...), press keys,
save_screenshot.

The Upstream view shows the recorded GitHub answers the demo ships (triage/demo/upstream_recorded.json,
marked "recorded"), since the demo never goes online; the fleet view adds a recorded second host (gpu-b) and an unreachable one.

    python scripts/screenshots.py            # writes screenshots/
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
OUT = ROOT / "screenshots"
SIZES = [(120, 36), (80, 24)]


def demo_app(hosts=None):
    from triage.demo import DEMO_LOG, DEMO_SNAPSHOT
    from triage.tui.app import TriageApp
    from triage.tui.intake import Options, full_report, quick_report

    os.chdir(ROOT)
    log = os.path.relpath(DEMO_LOG, ROOT)
    snap = os.path.relpath(DEMO_SNAPSHOT, ROOT) if os.path.exists(DEMO_SNAPSHOT) else None
    # Exactly what `triage --demo` shows: its full stage adds the recorded upstream answers it ships.
    opts = Options(source=log, snapshot=snap, offline=True, probe=False, demo=True)
    return TriageApp(opts, quick=quick_report, full=full_report, hosts=hosts)


async def shoot(name: str, keys: list[str], size: tuple[int, int], hosts=None, walk: bool = False) -> Path:
    from tui_helpers import settle

    app = demo_app(hosts)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        for k in keys:
            await pilot.press(k)
            await settle(pilot, app)
        if walk:  # the guided fix up to its first change, which is shown but not run
            fix = app.query_one("#fix")
            for _ in range(12):
                if fix.view is None or fix.view.needs == "confirm" or fix.finished:
                    break
                await pilot.press("enter")
                await settle(pilot, app)
        folder = OUT
        folder.mkdir(parents=True, exist_ok=True)
        fname = f"{name}-{size[0]}x{size[1]}.svg"
        app.save_screenshot(filename=fname, path=str(folder))
    return folder / fname


def main() -> int:
    from triage.tui.intake import load_hosts

    fleet = load_hosts(str(ROOT / "tests" / "fixtures" / "tui" / "fleet.json"))
    shots = [("1-diagnosis", [], None, False), ("2-machine", ["2"], None, False),
             ("3-fleet", ["2", "end"], fleet, False), ("4-upstream", ["3", "down", "down", "down", "down"], None, False),
             ("5-fix", ["4", "enter"], None, True), ("6-help", ["question_mark"], None, False)]
    made = []
    for size in SIZES:
        for name, keys, hosts, walk in shots:
            if name == "3-fleet" and not fleet:
                continue
            made.append(asyncio.run(shoot(name, keys, size, hosts, walk)))
    rsvg = shutil.which("rsvg-convert")
    for svg in made:
        print(svg.relative_to(ROOT))
        if rsvg:
            png = svg.with_suffix(".png")
            # librsvg squeezes the no-break spaces Rich writes after styled runs; plain spaces with
            # xml:space="preserve" render as the terminal shows them.
            text = svg.read_text(encoding="utf-8").replace("&#160;", " ").replace("<svg ", '<svg xml:space="preserve" ', 1)
            tmp = png.with_suffix(".tmp.svg")
            tmp.write_text(text, encoding="utf-8")
            try:
                subprocess.run([rsvg, "-w", "1200", str(tmp), "-o", str(png)], check=True)
            finally:
                tmp.unlink()
            print(png.relative_to(ROOT))
    if not rsvg:
        print("rsvg-convert not found: SVG only (apt-get install librsvg2-bin fonts-firacode for PNGs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
