"""The Preflight screen: type the `vllm serve ...` you are about to run and see, before launching it,
what would stop it on this machine (triage.preflight, run in a worker: it reads files, never runs vLLM)."""

from __future__ import annotations

import shlex
from typing import Any, Callable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from triage.tui.markup import escape  # cleaned of terminal control, markup escaped


def this_machine() -> Any:
    from triage.preflight.machine import probe_this_machine, read_environment, vllm_python

    m = probe_this_machine()
    py = vllm_python()
    if py:
        read_environment(m, py)
    return m


def run_preflight(command: str, machine_factory: Callable[[], Any]) -> tuple[list[Any], Any, str | None, dict]:
    """(diagnoses, machine, problem, found) for one command line; problem is a one-line reason it was not
    read, found what passing checks learnt (the attention backend vLLM will pick)."""
    from triage.preflight.launch import LaunchError, parse_launch
    from triage.preflight.model import read_model
    from triage.preflight.predict import predict

    try:
        launch = parse_launch(shlex.split(command))
    except (LaunchError, ValueError) as exc:
        return [], None, str(exc), {}
    machine = machine_factory()
    model = read_model(launch.model)
    found: dict = {}
    return predict(launch, model, machine, found), machine, model.problem, found


def render(diagnoses: list[Any], machine: Any, problem: str | None, found: dict) -> str:
    if machine is None:
        return f"[b $error]Cannot read that command:[/] {escape(problem or '')}"
    gpus = f"{len(machine.gpus)}x {machine.gpu_name}" if machine.gpus else "no GPU found"
    lines = [f"[$text-muted]{escape(gpus)} · vLLM {escape(machine.packages.get('vllm', 'unknown'))}[/]", ""]
    if problem:
        lines.append(f"[$warning]note:[/] {escape(problem)}")
    if not diagnoses:
        lines.append("[b $success]No failure predicted[/]: installation, parallelism, shared memory, model support, "
                     "dtype, quantization, attention backend, KV-cache budget and chat template all pass.")
        if found.get("attention_backend"):
            lines.append(f"Attention backend vLLM will pick: [b]{escape(found['attention_backend'])}[/] "
                         f"[$text-muted]({escape(found['gates_from'])})[/]")
    for i, d in enumerate(diagnoses):
        head = "WILL FAIL" if i == 0 else "ALSO"
        lines.append(f"[b $error]{head}:[/] [b]{escape(d.title)}[/]  [$text-muted]{escape(d.category)}, predicted[/]")
        lines += [f"    {escape(e.text)}" for e in d.evidence]
        lines.append(f"  [b]Fix:[/] {escape(d.fix.summary)}")
        if d.fix.playbook:
            lines.append(f"  [$text-muted]playbook {escape(d.fix.playbook)}[/]")
        lines.append("")
    return "\n".join(lines)


class PreflightScreen(ModalScreen[None]):
    """One command line in, the predicted failures out; Escape closes."""

    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, machine_factory: Callable[[], Any] | None = None, command: str = "") -> None:
        super().__init__()
        self.machine_factory = machine_factory or this_machine
        self.command = command

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box"):
            yield Static("[b]Preflight[/]: will this launch fail here? (nothing is started, no weights are loaded)")
            yield Input(value=self.command, placeholder="vllm serve MODEL --tensor-parallel-size 2 ...",
                        id="preflight-input")
            with VerticalScroll(id="preflight-scroll"):
                yield Static("", id="preflight-result")
            yield Static("[$text-muted]enter: predict · escape: close[/]")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self.query_one("#preflight-result", Static).update("[$text-muted]reading the model and the machine...[/]")
            self._predict(event.value.strip())

    @work(thread=True, exclusive=True, group="preflight")
    def _predict(self, command: str) -> None:
        text = render(*run_preflight(command, self.machine_factory))
        self.app.call_from_thread(self.query_one("#preflight-result", Static).update, text)

    def action_close(self) -> None:
        self.dismiss(None)
