"""`triage probe`: what this machine (or remote hosts, or a fleet) is, as a table or JSON.

    triage probe                               # this machine
    triage probe --host gpu-a --host root@10.0.0.7:2222 --json
    triage probe --hosts inventory             # one host a line, or an Ansible YAML inventory
    triage probe --save-patches ~/vllm-patches # keep hand-patched vLLM files before an upgrade
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_UNREACHABLE = 4  # some host could not be probed (the others are still reported)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        print(f"triage probe: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="triage probe", description="Probe GPUs, drivers, CUDA and the Python environment "
                "that runs vLLM, here or on remote hosts over SSH.",
                epilog="Exit status: 0 all hosts probed, 2 usage error, 4 some host could not be probed.")
    p.add_argument("--host", action="append", default=[], metavar="[USER@]HOST[:PORT]",
                   help="probe this host over SSH (aliases from ~/.ssh/config); repeatable")
    p.add_argument("--hosts", metavar="FILE", help="hosts from a file: one a line, or an Ansible YAML inventory")
    p.add_argument("--python", metavar="PATH", help="the Python that runs vLLM (default: this one, or python3 "
                   "on remote hosts)")
    p.add_argument("--deep", action="store_true", help="also import torch (in a subprocess, with a timeout) "
                   "for its compiled CUDA arch list")
    p.add_argument("--json", action="store_true", help='print {"hosts": [...]} as JSON')
    p.add_argument("--save-patches", metavar="DIR", help="copy vLLM files that differ from the installed wheel "
                   "into DIR (keeping their paths), so an upgrade cannot lose them")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="per-host timeout (default 120)")
    p.add_argument("--concurrency", type=int, default=16, metavar="N", help="hosts probed at once (default 16)")
    return p


def main(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error already printed (2)
        return int(exc.code or 0)
    from triage.probes.fleet import read_inventory

    specs = list(args.host)
    if args.hosts:
        try:
            specs += read_inventory(args.hosts)
        except ValueError as exc:
            print(f"triage probe: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.timeout <= 0 or args.concurrency < 1:
        print("triage probe: --timeout and --concurrency must be positive", file=sys.stderr)
        return EXIT_USAGE
    if specs:
        from triage.probes.over_ssh import probe_hosts
        from triage.remote import parse_target

        for s in specs:
            try:
                parse_target(s)
            except ValueError as exc:
                print(f"triage probe: {exc}", file=sys.stderr)
                return EXIT_USAGE
        probes = probe_hosts(specs, python=args.python, deep=args.deep, timeout=args.timeout,
                             concurrency=args.concurrency)
    else:
        from triage.probes import gather

        probes = [gather(python=args.python, deep=args.deep, timeout=args.timeout)]

    saved: list[str] = []
    if args.save_patches:
        try:
            saved = save_patches(probes, Path(args.save_patches), remote=bool(specs))
        except OSError as exc:
            print(f"triage probe: cannot save patches in {args.save_patches}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE

    if args.json:
        from triage.probes.fleet import fleet_diff

        out: dict[str, Any] = {"hosts": [p.to_json() for p in probes]}
        if len(probes) > 1:
            out["diff"] = fleet_diff(probes)
        if args.save_patches:
            out["saved_patches"] = saved
        sys.stdout.write(json.dumps(out, indent=2, default=str) + "\n")
    else:
        render(probes, saved=saved, save_dir=args.save_patches)
    return EXIT_OK if all(p.ok for p in probes) else EXIT_UNREACHABLE


# ------------------------------------------------------------------ --save-patches
def _safe_rel(rel: str) -> PurePosixPath | None:
    """A RECORD path as a relative path that stays inside the target directory, or None."""
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        return None
    return p


def _host_dir(host: str) -> str:
    return re.sub(r"[^\w.-]+", "_", host).strip("._") or "host"


def save_patches(probes: list[Any], dest: Path, *, remote: bool) -> list[str]:
    """Copy each host's patched vLLM files to dest (dest/<host>/ for remote hosts) with a manifest."""
    written: list[str] = []
    for probe in probes:
        inst = (probe.facts or {}).get("vllm_install") or {}
        files = list(inst.get("patched_files") or []) + list(inst.get("added_files") or [])
        if not probe.ok or not files:
            continue
        base = dest / _host_dir(probe.host) if remote else dest
        git = inst.get("git") or {}
        root = git.get("source") if inst.get("editable") else inst.get("location")
        if not root:
            continue
        manifest: dict[str, Any] = {"host": probe.host, "vllm_version": inst.get("version"),
                                    "installed": inst.get("description"), "root": root, "files": []}
        for rel in files:
            safe = _safe_rel(rel)
            if safe is None:
                continue
            src = f"{root.rstrip('/')}/{safe}"
            text = _read_remote(probe.host, src) if remote else _read_local(src)
            if text is None:
                continue
            target = base / safe
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text)
            manifest["files"].append({"path": str(safe), "sha256": hashlib.sha256(text).hexdigest(),
                                      "kind": "patched" if rel in inst.get("patched_files", []) else "added"})
            written.append(str(target))
        base.mkdir(parents=True, exist_ok=True)
        (base / "triage-patches.json").write_text(json.dumps(manifest, indent=2) + "\n")
        written.append(str(base / "triage-patches.json"))
    return written


def _read_local(path: str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


def _read_remote(host: str, path: str) -> bytes | None:
    from triage.remote import fetch_text

    text = fetch_text(host, path)
    return text.encode() if text is not None else None


# ------------------------------------------------------------------ human output
_SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items())
    if isinstance(v, list):
        return ", ".join(_fmt(x) for x in v) or "-"
    return str(v)


def render(probes: list[Any], *, saved: list[str] | None = None, save_dir: str | None = None,
           console: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = console or Console(highlight=False)
    for probe in probes:
        con.rule(f"[bold]{escape(probe.host)}[/]")
        if not probe.ok:
            con.print(f"[bold red]not probed:[/] {escape(str(probe.error))}")
            continue
        try:
            _render_host(con, probe)
        except (KeyError, TypeError, AttributeError, ValueError):  # facts of an unexpected shape
            con.print("[bold red]the probe's facts have an unexpected shape:[/] see `triage probe --json`")
    if len(probes) > 1:
        from triage.probes.fleet import fleet_diff

        diff = fleet_diff(probes)
        con.rule("[bold]fleet: what differs[/]")
        ok_hosts = [p.host for p in probes if p.ok]
        if not diff:
            con.print(f"The {len(ok_hosts)} reachable hosts agree on driver, CUDA, vLLM, torch, GPUs and patches.")
        else:
            d = Table()
            d.add_column("fact", style="bold")
            for h in ok_hosts:
                d.add_column(escape(h))
            for label, values in diff.items():
                d.add_row(label, *[escape(_fmt(values.get(h))) for h in ok_hosts])
            con.print(d)
        down = [p.host for p in probes if not p.ok]
        if down:
            con.print(f"[bold red]{len(down)} host(s) not probed:[/] {escape(', '.join(down))}")
    if save_dir is not None:
        n = len([s for s in (saved or []) if not s.endswith("triage-patches.json")])
        con.print(f"Saved {n} patched file(s) under {escape(save_dir)}" if n else "No patched vLLM files to save.")


def _render_host(con: Any, probe: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    f = probe.facts
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    for label, value in summary_rows(f):
        t.add_row(label, escape(value))
    con.print(t)
    gpus = f.get("gpus") or []
    if gpus:
        g = Table(title="GPUs", title_justify="left")
        for col in ("#", "name", "CC", "memory used / total MiB", "persistence", "MIG", "NVLink", "processes"):
            g.add_column(col)
        for gpu in gpus:
            procs = gpu.get("processes")
            # Every cell is markup to rich: a remote host's values are escaped, whatever their field.
            g.add_row(escape(str(gpu.get("index"))), escape(_fmt(gpu.get("name"))),
                      escape(_fmt(gpu.get("compute_capability"))),
                      escape(f"{_fmt(gpu.get('memory_used_mib'))} / {_fmt(gpu.get('memory_total_mib'))}"),
                      escape(_fmt(gpu.get("persistence_mode"))),
                      escape(_fmt((gpu.get("mig") or {}).get("mode") if isinstance(gpu.get("mig"), dict)
                                  else gpu.get("mig"))),
                      escape(_fmt(gpu.get("nvlink") if not isinstance(gpu.get("nvlink"), dict)
                                  else f"{gpu['nvlink'].get('active')}/{gpu['nvlink'].get('links')}")),
                      escape(", ".join(f"{p['pid']}" for p in procs) if isinstance(procs, list) and procs
                             else ("-" if isinstance(procs, list) else _fmt(procs))))
        con.print(g)
    for fd in probe.findings:
        style = _SEV_STYLE.get(fd.get("severity", ""), "")
        con.print(f"[{style}]{escape(fd.get('severity', ''))}[/] {escape(fd.get('title', ''))}")
        if fd.get("fix"):
            con.print(f"    [dim]fix:[/] {escape(fd['fix'])}")


def summary_rows(f: dict[str, Any]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    rows.append(("GPUs", f.get("gpu_summary") or "none visible"))
    if f.get("compute_capabilities"):
        rows.append(("compute capability", ", ".join(f["compute_capabilities"])))
    rows.append(("driver", f"{_fmt(f.get('driver_version'))} (CUDA {_fmt(f.get('cuda_driver_version'))})"))
    py = f.get("python") or {}
    if py:
        rows.append(("Python", f"{_fmt(py.get('version'))} {_fmt(py.get('executable'))}"))
    inst = f.get("vllm_install")
    rows.append(("vLLM", inst.get("description") if inst else "not installed in this Python"))
    if inst and inst.get("patched_files"):
        rows.append(("patched vLLM files", ", ".join(inst["patched_files"])))
    if f.get("torch_version"):
        arch = f" arch {' '.join(f['torch_arch_list'])}" if f.get("torch_arch_list") else ""
        rows.append(("torch", f"{f['torch_version']} (CUDA {_fmt(f.get('torch_cuda_version'))}){arch}"))
    pk = f.get("packages") or {}
    libs = [f"{n} {pk[n]}" for n in ("triton", "flashinfer-python", "flash-attn", "deep-gemm", "transformers",
                                      "xformers", "nvidia-nccl-cu12", "nvidia-nccl-cu13") if n in pk]
    if libs:
        rows.append(("libraries", ", ".join(libs)))
    tk = f.get("cuda_toolkit") or {}
    kits = [f"{k.get('version') or '?'} ({k.get('path')})" for k in tk.get("toolkits") or [] if not k.get("link_to")]
    nvcc = tk.get("nvcc")
    if kits or nvcc:
        rows.append(("CUDA toolkits", ", ".join(kits) + (f"; nvcc {nvcc.get('version')} on PATH" if nvcc else "")))
    osi = f.get("os") or {}
    if osi:
        cont = f.get("container") or {}
        where = f", in {cont.get('runtime')} container" if cont.get("in_container") else ""
        rows.append(("OS", f"{_fmt(osi.get('name'))}, kernel {_fmt(osi.get('kernel'))} {_fmt(osi.get('arch'))}{where}"))
    if f.get("shm"):
        rows.append(("/dev/shm", f"{f['shm'].get('size_mib')} MiB"))
    cvd = f.get("cuda_visible_devices")
    if cvd:
        vis = ", ".join(f"{v['logical']}->GPU {v['physical_index']}" for v in cvd.get("visible", []))
        rows.append(("CUDA_VISIBLE_DEVICES", f"{cvd.get('value')!r}: {vis or 'no GPU'}"))
    return rows
