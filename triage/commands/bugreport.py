"""`triage report`: write a ready-to-file upstream bug report in vLLM's issue template.

    triage report --log vllm.log [--out issue.md] [--snapshot probe.json] [--tried "…"]

Everything comes from the diagnosis (offline: no request leaves the machine while writing it)
and is redacted: host and user names, IPs, tokens, e-mails, home and model paths. The result
follows vLLM's 400-bug-report template: environment in a <details> block, the bug with the
command and the decisive log lines, what was tried, and the template's checkbox.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from triage.upstream.redact import redact

TEMPLATE_URL = "https://github.com/vllm-project/vllm/issues/new?template=400-bug-report.yml"


def _fmt_args(args: dict[str, Any]) -> str:
    from triage.launch import serve_argv, shown

    return shown(serve_argv(args))


def _env_lines(env: dict[str, Any]) -> list[str]:
    rows: list[tuple[str, Any]] = []
    inst = env.get("vllm_install") or {}
    rows.append(("vLLM Version", env.get("vllm_version")))
    if isinstance(inst, dict) and inst.get("kind"):
        extra = f" (base {inst['base']})" if inst.get("base") and inst.get("base") != env.get("vllm_version") else ""
        rows.append(("vLLM install", f"{inst['kind']}{extra}"))
    rows.append(("PyTorch version", env.get("torch_version")))
    rows.append(("CUDA version", env.get("cuda_version")))
    rows.append(("Nvidia driver version", env.get("driver_version")))
    py = env.get("python")
    rows.append(("Python version", py.get("version") if isinstance(py, dict) else env.get("python_version")))
    gpus = env.get("gpus") or []
    if isinstance(gpus, list) and gpus:
        names: dict[str, int] = {}
        for g in gpus:
            if isinstance(g, dict):
                label = str(g.get("name") or "GPU")
                if g.get("compute_capability"):
                    label += f" (compute capability {g['compute_capability']})"
                names[label] = names.get(label, 0) + 1
        rows.append(("GPU models and configuration", "; ".join(f"{n}x {k}" for k, n in names.items())))
    elif env.get("compute_capability"):
        rows.append(("GPU compute capability", env.get("compute_capability")))
    rows.append(("Model architecture", env.get("architecture")))
    out = [f"{k:<29}: {v}" for k, v in rows if v not in (None, "", [])]
    pkgs = env.get("packages") or {}
    if isinstance(pkgs, dict) and pkgs:
        out.append("")
        out.append("Versions of relevant libraries")
        for name in sorted(pkgs):
            out.append(f"[pip3] {name}=={pkgs[name]}")
    patched = env.get("patched_files") or []
    if patched:
        out.append("")
        out.append("Locally modified vLLM files (differ from the installed wheel's RECORD)")
        for p in patched:
            out.append(f"  {p.get('path') if isinstance(p, dict) else p}")
    return out


def _rejections(facts: dict[str, Any]) -> list[str]:
    rej = facts.get("rejected")
    if not isinstance(rej, dict) or not rej:
        return []
    out = ["", "Attention backends vLLM considered and why each was rejected:", "", "| backend | reasons |", "| --- | --- |"]
    for name, reasons in rej.items():
        rs = reasons if isinstance(reasons, list) else [reasons]
        out.append(f"| {name} | {'; '.join(str(r).replace('|', '/') for r in rs)} |")
    cfg = {k: facts[k] for k in ("head_size", "dtype", "kv_cache_dtype", "block_size", "use_mla", "use_sparse") if k in facts}
    if cfg:
        out.insert(1, "Selector configuration: " + ", ".join(f"{k}={v}" for k, v in cfg.items()))
    return out


def render(report: Any, *, tried: list[str] | None = None) -> str:
    """The issue text (title line first), before redaction."""
    env = report.environment or {}
    d = report.diagnoses[0]
    gpu = ""
    gpus = env.get("gpus") or []
    if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict) and gpus[0].get("name"):
        gpu = str(gpus[0]["name"]).replace("NVIDIA ", "")
    elif env.get("compute_capability"):
        gpu = f"compute capability {env['compute_capability']}"
    ctx = ", ".join(x for x in [gpu, f"vLLM {env['vllm_version']}" if env.get("vllm_version") else ""] if x)
    title = f"[Bug]: {d.title}" + (f" ({ctx})" if ctx else "")

    lines = [f"Title: {title}", "", f"<!-- file at {TEMPLATE_URL} -->", "", "### Your current environment", "",
             "<details>", "<summary>The output of <code>python collect_env.py</code></summary>", "", "```text",
             "# Collected by triage from the log and this machine; replace with `python collect_env.py` if you can.",
             *_env_lines(env), "```", "", "</details>", "", "### 🐛 Describe the bug", ""]
    what = f"`vllm serve` fails at startup: {d.title[0].lower() + d.title[1:]}." if d.title else "`vllm serve` fails."
    if env.get("architecture"):
        what += f" Model architecture: `{env['architecture']}`."
    lines += [what, ""]
    args = env.get("launch_args")
    if isinstance(args, dict) and args:
        lines += ["Command (as vLLM logged its non-default arguments):", "", "```bash", _fmt_args(args), "```", ""]
    lines += ["The decisive log lines:", "", "```text"]
    for diag in report.diagnoses[:3]:
        for e in diag.evidence[:6]:
            lines.append(e.text)
    lines += ["```", ""]
    lines += _rejections(d.facts or {})
    lines += ["", "### What was tried", ""]
    for t in tried or []:
        lines.append(f"- {t}")
    lines.append(f"- triage's diagnosis: `{d.signature}` ({d.category}), confidence {round(float(d.confidence), 2)}.")
    if d.fix and d.fix.summary:
        lines.append(f"- Suggested workaround: {d.fix.summary}")
    up = report.upgrade
    if up is not None and up.verdict != "unknown":
        tv = f" (target {up.target_version})" if up.target_version else ""
        lines.append(f"- Upgrade check: {up.verdict}{tv}.")
    hits = [h for h in (report.upstream or []) if "other subsystem" not in h.why][:5]
    if hits:
        lines += ["", "Possibly related (found by triage; none matched exactly):", ""]
        lines += [f"- #{h.number} {h.title} ({h.why})" for h in hits]
    for other in report.diagnoses[1:3]:
        lines.append(f"- Also seen in the log: {other.title} (`{other.signature}`)")
    lines += ["", "### Before submitting a new issue...", "",
              "- [ ] Make sure you already searched for relevant issues, and asked the chatbot living at the bottom "
              "right corner of the [documentation page](https://docs.vllm.ai/en/latest/), which can answer lots of "
              "frequently asked questions.", ""]
    return "\n".join(lines)


def redact_report(text: str, env: dict[str, Any], *, identities: list[str] | None = None) -> str:
    model = env.get("model")
    if isinstance(model, str) and model.startswith(("/", "~", ".")):
        # A local model directory: keep only its last component's family, never the path.
        arch = env.get("architecture")
        text = text.replace(model, f"<local model: {arch}>" if arch else "<local model>")
    extra = [str(env.get("probed_host") or "")]
    return redact(text, extra=extra, identities=identities)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="triage report",
                                description="Write a redacted upstream bug report in vLLM's issue template.")
    p.add_argument("--log", required=True, metavar="PATH", help="the failed vLLM log ('-' for standard input)")
    p.add_argument("--out", metavar="FILE", help="write the report here instead of standard output")
    p.add_argument("--snapshot", metavar="FILE", help="a saved `triage probe --json` for the environment section")
    p.add_argument("--tried", action="append", default=[], metavar="TEXT",
                   help="something you already tried (repeatable)")
    args = p.parse_args(argv)
    from triage.pipeline import build_report

    try:
        report = build_report(args.log, offline=True, probe=False, snapshot=args.snapshot)
    except Exception as exc:  # InputError and friends: one line, no traceback
        msg = str(exc) or type(exc).__name__
        print(f"triage report: {msg}", file=sys.stderr)
        return 2
    if not report.diagnoses:
        print("triage report: no failure found in the log; nothing to report", file=sys.stderr)
        return 3
    text = redact_report(render(report, tried=args.tried), report.environment or {})
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"triage report: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"triage report: wrote {args.out} (redacted; review before filing at {TEMPLATE_URL})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
