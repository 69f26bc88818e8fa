"""Machine: what the probes found (GPUs, driver, CUDA, the Python environment, how vLLM was installed,
hand-patched files) and, for several hosts, the fleet table with the differences highlighted."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from triage.model import Report
from triage.report.text import machine_differs, machine_lines
from triage.tui.focus import OwnFocusStyle
from triage.tui.markup import escape  # cleaned of terminal control, markup escaped

SEVERITY = {"error": "$error", "warning": "$warning", "info": "$text-muted"}


def machine_markup(env: dict[str, Any], *, busy: str = "") -> str:
    host = env.get("probed_host")
    where = f"probed: {escape(str(host))}" if host else "from the log only (no probe)"
    out = [f"[b]Machine[/] [$text-muted]({where})[/]"]
    if busy:
        out.append(f"[$accent]{escape(busy)}[/]")
    differs = machine_differs(env)
    if differs:
        out.append(f"  [$warning]Not the machine that wrote the log:[/] {escape('; '.join(differs))}. "
                   "`a` probes the machine that ran vLLM.")
    for line in machine_lines(env):
        out.append(f"  {escape(line)}")
    if env.get("gpu_summary") and not env.get("gpus"):
        out.append(f"  GPUs: {escape(str(env['gpu_summary']))}")
    tk = (env.get("cuda_toolkit") or {}).get("nvcc") or {}
    if tk.get("version"):
        out.append(f"  CUDA toolkit (nvcc) {escape(str(tk['version']))} at {escape(str(tk.get('path', '')))}")
    osf = env.get("os") or {}
    if osf.get("name"):
        kernel = f", kernel {osf['kernel']}" if osf.get("kernel") else ""
        out.append(f"  {escape(str(osf['name']))}{escape(kernel)}")
    cont = env.get("container") or {}
    if cont.get("in_container"):
        out.append(f"  in a container ({escape(str(cont.get('runtime') or 'unknown runtime'))})")
    inst = env.get("vllm_install") or {}
    if isinstance(inst, dict) and inst.get("source"):
        out.append(f"  vLLM installed from: {escape(str(inst['source']))}"
                   + (f" with {escape(str(inst['installer']))}" if inst.get("installer") else "")
                   + (" (editable)" if inst.get("editable") else ""))
    patched = env.get("patched_files") or []
    if patched:
        out.append(f"[$warning b]Patched by hand ({len(patched)})[/] — an upgrade or reinstall overwrites these:")
        out.extend(f"  [$warning]{escape(str(p))}[/]" for p in patched)
    findings = env.get("findings") or []
    if findings:
        out.append("[b]Findings[/]")
        for f in findings:
            sev = str(f.get("severity", "info"))
            out.append(f"  [{SEVERITY.get(sev, '$text-muted')}]{escape(sev)}[/] {escape(str(f.get('title', '')))}")
            if f.get("fix"):
                out.append(f"      [$text-muted]→ {escape(str(f['fix']))}[/]")
    if not host and not machine_lines(env):
        out.append("  The log says little about the machine. Probing needs this machine (or --host) or a "
                   "saved snapshot (--snapshot).")
    return "\n".join(out)


def fleet_rows(hosts: list[Any]) -> tuple[list[str], list[tuple[str, list[str], bool]]]:
    """(host names, [(label, values per host, differs)]) from triage.probes.fleet."""
    from triage.probes.fleet import DIFF_KEYS

    ok = [h for h in hosts if getattr(h, "ok", False)]
    names = [h.host for h in ok]
    rows: list[tuple[str, list[str], bool]] = []
    for label, get in DIFF_KEYS:
        vals = []
        for h in ok:
            try:
                v = get(h.facts)
            except (AttributeError, TypeError):
                v = None
            vals.append("—" if v in (None, "") else str(v))
        if all(v == "—" for v in vals):
            continue
        rows.append((label, vals, len(set(vals)) > 1))
    return names, rows


class MachinePane(OwnFocusStyle, VerticalScroll):
    BINDINGS = [
        Binding("a", "add_host", "Add host"),
        Binding("r", "reprobe", "Probe again"),
    ]

    def compose(self) -> ComposeResult:
        yield Static("", id="machine-text")
        yield Static("", id="gpus-title")
        gpus = DataTable(id="gpus", cursor_type="row", zebra_stripes=False)
        fleet = DataTable(id="fleet", cursor_type="row")
        gpus.display = fleet.display = False  # shown once there is something to tabulate
        yield gpus
        yield Static("", id="fleet-title")
        yield fleet

    def show(self, report: Report | None, hosts: list[Any], *, busy: str = "") -> None:
        env = report.environment if report is not None else {}
        self.query_one("#machine-text", Static).update(machine_markup(env, busy=busy))
        self._gpus(env.get("gpus") or [])
        self._fleet(hosts, errors=[h for h in hosts if not getattr(h, "ok", True)])

    def _gpus(self, gpus: list[dict[str, Any]]) -> None:
        table = self.query_one("#gpus", DataTable)
        title = self.query_one("#gpus-title", Static)
        table.clear(columns=True)
        if not gpus:
            table.display = False
            title.update("")
            return
        title.update(f"[b]GPUs[/] ({len(gpus)})")
        table.add_columns("#", "GPU", "cc", "memory used/total", "persist.", "procs")
        for g in gpus:
            mem = ""
            if g.get("memory_total_mib") is not None:
                mem = f"{g.get('memory_used_mib', 0):,} / {g['memory_total_mib']:,} MiB"
            procs = g.get("processes") or []
            table.add_row(str(g.get("index", "")), str(g.get("name", "?")), str(g.get("compute_capability", "")),
                          mem, str(g.get("persistence_mode", "")),
                          Text(str(len(procs)), style="bold yellow") if procs else "0")
        table.display = True

    def _fleet(self, hosts: list[Any], errors: list[Any]) -> None:
        table = self.query_one("#fleet", DataTable)
        title = self.query_one("#fleet-title", Static)
        table.clear(columns=True)
        names, rows = fleet_rows(hosts)
        lines = []
        for h in errors:
            lines.append(f"  [$error]{escape(h.host)}: {escape(str(h.error or 'unreachable'))}[/]")
        if len(names) < 2:
            table.display = False
            title.update("\n".join(["[$text-muted]One host. Press [b]a[/] to add another and compare them.[/]"]
                                    + lines))
            return
        differ = sum(1 for _l, _v, d in rows if d)
        title.update("\n".join([f"[b]Fleet[/] {len(names)} hosts · [$warning b]{differ} difference(s)[/] "
                                "marked ≠"] + lines))
        table.add_column("")
        for n in names:
            table.add_column(n)
        for label, vals, d in rows:
            style = "bold yellow" if d else ""
            cells = [Text(("≠ " if d else "  ") + label, style=style)]
            cells.extend(Text(v, style=style) for v in vals)
            table.add_row(*cells)
        table.display = True

    def action_add_host(self) -> None:
        self.app.action_add_host()  # type: ignore[attr-defined]

    def action_reprobe(self) -> None:
        self.app.action_reprobe()  # type: ignore[attr-defined]
