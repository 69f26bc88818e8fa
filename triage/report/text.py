"""The plain report: what a person reads in a terminal without the TUI, or pastes into a ticket.

rich does the layout; colour only on a terminal, and never with NO_COLOR set.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from triage.model import Diagnosis, Report


def _describe_install(env: dict[str, Any]) -> str:
    inst = env.get("vllm_install") or {}
    v = env.get("vllm_version")
    if not v:
        return ""
    parts = [f"vLLM {v}"]
    desc = inst.get("description") if isinstance(inst, dict) else None
    if desc:
        parts.append(f"({desc.removeprefix(f'vLLM {v}: ')})")
    elif isinstance(inst, dict) and inst.get("kind"):
        parts.append(f"({inst['kind']})")
    return " ".join(parts)


def machine_lines(env: dict[str, Any]) -> list[str]:
    out: list[str] = []
    inst = _describe_install(env)
    if inst:
        out.append(inst)
    gpus = env.get("gpus") or []
    if gpus:
        names: dict[str, int] = {}
        for g in gpus:
            key = g.get("name", "?")
            if g.get("compute_capability"):
                key += f" (compute capability {g['compute_capability']})"
            names[key] = names.get(key, 0) + 1
        out.append("GPUs: " + ", ".join(f"{n} x {k}" if n > 1 else k for k, n in names.items()))
    elif env.get("compute_capability"):
        out.append(f"GPU compute capability {env['compute_capability']}")
    drv = [f"driver {env['driver_version']}"] if env.get("driver_version") else []
    if env.get("cuda_driver_version"):
        drv.append(f"CUDA driver {env['cuda_driver_version']}")
    if env.get("cuda_version"):
        drv.append(f"torch built for CUDA {env['cuda_version']}")
    if drv:
        out.append(", ".join(drv))
    pk = env.get("packages") or {}
    libs = [f"{n} {pk[n]}" for n in ("torch", "triton", "flashinfer-python", "flashinfer", "transformers", "deep-gemm", "deep_gemm")
            if pk.get(n)]
    if not libs and env.get("torch_version"):
        libs = [f"torch {env['torch_version']}"]
    if libs:
        out.append(", ".join(libs))
    py = env.get("python") or {}
    if py.get("executable"):
        out.append(f"Python {py.get('version', '')} at {py['executable']}".replace("  ", " "))
    elif env.get("python_prefix"):
        out.append(f"Python {env.get('python_version', '')} in {env['python_prefix']} (from the log's tracebacks)")
    patched = env.get("patched_files") or []
    if patched:
        out.append(f"{len(patched)} vLLM file(s) patched by hand: " + ", ".join(patched[:4])
                   + (" ..." if len(patched) > 4 else ""))
    if env.get("model"):
        arch = f" ({env['architecture']})" if env.get("architecture") else ""
        out.append(f"Model: {env['model']}{arch}")
    return out


def machine_differs(env: dict[str, Any]) -> list[str]:
    """Where the probed machine is not the one that wrote the log, in words (empty: nothing says so).
    The report shows the probed machine's facts; these lines keep a reader from mixing the two."""
    if not env.get("probed_host"):
        return []
    out: list[str] = []
    if any(f.get("id") == "python.log_env_absent" for f in env.get("findings") or []):
        out.append("the log's Python environment is not on this machine")
    args = env.get("launch_args") or {}
    want = 1
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        try:
            want *= int(args.get(key) or 1)
        except (TypeError, ValueError):
            pass
    have = len(env.get("gpus") or [])
    if want > have:
        out.append(f"the log's vLLM used {want} GPUs; this machine has " + (str(have) if have else "none"))
    for key, logged in (env.get("from_log") or {}).items():
        if key in ("vllm_version", "torch_version", "compute_capability", "driver_version", "cuda_version"):
            out.append(f"{key.replace('_', ' ')}: {logged} in the log, {env.get(key)} here")
    return out


def render(report: Report, out: TextIO | None = None, *, log_name: str | None = None,
           fix_hint: str | None = None) -> None:
    from rich.console import Console
    from rich.text import Text

    from triage.sanitize import markup as escape  # every interpolated value: cleaned, markup escaped

    out = out or sys.stdout
    color = out.isatty() and not os.environ.get("NO_COLOR")
    con = Console(file=out, force_terminal=color, no_color=not color, highlight=False, soft_wrap=not out.isatty())
    con.on_broken_pipe = _reader_gone  # type: ignore[method-assign]  # rich would exit 1
    src = "standard input" if report.source == "-" else report.source
    con.print(Text(f"triage: {src} ({report.lines:,} lines, {report.bytes:,} bytes)", style="bold"))
    if not report.input_complete:
        con.print("[yellow]the input has not ended: vLLM may still be writing[/]")
    if not report.diagnoses:
        con.print("\n[green]No failure found in this log.[/] "
                  + ("Recognised, harmless: " + "; ".join(escape(n.title) for n in report.notes) if report.notes else ""))
    for i, d in enumerate(report.diagnoses):
        _diagnosis(con, d, i, log_name or report.source, escape, fix_hint)
    env = report.environment
    lines = machine_lines(env)
    differs = machine_differs(env)
    if lines or differs:
        con.print("\n[bold]Machine[/]" + (f" (probed: {escape(env['probed_host'])})" if env.get("probed_host") else " (from the log)"))
        if differs:
            con.print("  [yellow]Not the machine that wrote the log:[/] " + escape("; ".join(differs))
                      + ". Probe the machine that ran vLLM with --host (or give its --snapshot).")
        for ln in lines:
            con.print(f"  {escape(ln)}")
    for f in env.get("findings") or []:
        if f.get("severity") in ("warning", "error"):
            con.print(f"  [yellow]![/] {escape(str(f.get('title', '')))}"
                      + (f" -> {escape(str(f['fix']))}" if f.get("fix") else ""))
    if report.upstream:
        recorded = any(h.recorded for h in report.upstream)
        con.print("\n[bold]Upstream[/]" + (" (recorded answers: the demo does not go online)" if recorded else ""))
        for h in report.upstream[:6]:
            con.print(f"  #{h.number} \\[{escape(h.state)}] {escape(h.title[:90])}")
            con.print(f"      {escape(h.why)}  {escape(h.url)}")
    if report.upgrade:
        u = report.upgrade
        target = f" (to {escape(u.target_version)})" if u.target_version else ""
        words = u.verdict_words
        con.print(f"\n[bold]{escape(words[:1].upper() + words[1:])}[/]{target}")
        for e in u.evidence[:4]:
            con.print(f"  {escape(e)}")
        if u.overwrites:
            con.print(f"  would overwrite: {escape(', '.join(u.overwrites))}")
    if report.notes and report.diagnoses:
        con.print("\n[bold]Harmless[/] (recognised, not the cause): " + "; ".join(escape(n.title) for n in report.notes))
    for w in report.warnings:
        con.print(f"[dim]note: {escape(w)}[/]")


def _reader_gone() -> None:
    """The reader went away (`triage ... --report | head -1`): stop writing, as triage.cli does."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    raise BrokenPipeError


def _diagnosis(con, d: Diagnosis, i: int, log_name: str, escape, fix_hint: str | None = None) -> None:
    head = "ROOT CAUSE" if i == 0 else f"ALSO ({i + 1})"
    style = "bold red" if i == 0 else "bold yellow"
    con.print(f"\n[{style}]{head}[/] [dim]{escape(d.category)} . {escape(d.signature)} . confidence {d.confidence:.0%}[/]")
    con.print(f"  [bold]{escape(d.title)}[/]")
    if d.explanation:
        con.print("  Why:")
        for ln in d.explanation:
            con.print(f"    {escape(ln)}")
    rep = d.facts.get("repeated")
    if isinstance(rep, dict) and rep.get("count", 0) > 1:
        con.print(f"  [bold]Repeated {rep['count']} times[/] (first at line {rep['first_line']}, last at line "
                  f"{rep['last_line']})")
    if d.evidence:
        con.print("  Evidence:")
        for e in d.evidence[:6]:
            text = e.text if len(e.text) <= 400 else e.text[:400] + " ..."
            con.print(f"    [cyan]{e.line:>7}[/] {escape(text)}")
    if d.fix.summary:
        con.print(f"  [green]Fix:[/] {escape(d.fix.summary)}")
    if d.fix.playbook and i == 0:
        src = "-" if log_name == "-" else log_name
        hint = fix_hint or (f"triage fix --log {src}" if src != "-" else "triage fix --log vllm.log")
        con.print(f"  [green]Guided fix:[/] {escape(hint)}   [dim](playbook {d.fix.playbook})[/]")
