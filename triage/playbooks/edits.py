"""Edits of launch files: set a `vllm serve` flag or an environment variable in a shell script or a
docker compose file. Pure text in, text out; the caller shows the diff, backs up and writes.

Values are quoted for the file they go into (shlex for shell, JSON-style for YAML), so a value that
came from a log cannot turn into shell code. Where the file is ambiguous (vLLM launched in two places,
a flag given twice) the edit is refused with a reason rather than guessed.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex

from triage.lazyre import lazy

SAFE_VALUE = lazy(r"^[A-Za-z0-9._:/@%+=,-]+$")
LAUNCH_RE = lazy(r"\bvllm\s+serve\b|\bvllm\.entrypoints\.openai\.api_server\b")


class EditError(ValueError):
    pass


def is_compose(path: str, text: str) -> bool:
    return path.endswith((".yml", ".yaml")) or bool(re.search(r"(?m)^services:\s*$", text))


def _q_shell(value: str) -> str:
    return value if SAFE_VALUE.match(value) else shlex.quote(value)


def _check_flag(flag: str) -> str:
    if not re.fullmatch(r"--[a-z0-9][a-z0-9.-]*", flag):
        raise EditError(f"not a vLLM flag: {flag!r}")
    return flag


def set_flag(text: str, flag: str, value: str | None, *, compose: bool) -> str:
    """Set `flag` to `value` (None: a switch without value) in the file's vLLM command."""
    flag = _check_flag(flag)
    f = re.escape(flag)
    end = r"(?![A-Za-z0-9_.-])"
    tok = r"""(?:"[^"\n]*"|'[^'\n]*'|[^\s"',\]\\]+)"""
    forms = [
        # "--flag", "value"   (compose list form, JSON style)
        ("list", re.compile(rf"""(?P<q>["'])(?P<flag>{f})(?P=q)(?P<sep>\s*,\s*)(?P<val>"[^"\n]*"|'[^'\n]*')""")),
        # - --flag \n - value  (compose block list)
        ("block", re.compile(rf"""(?m)^(?P<ind>[ \t]*)-[ \t]+["']?(?P<flag>{f})["']?[ \t]*\n(?P=ind)-[ \t]+(?P<val>{tok})[ \t]*$""")),
        # --flag=value
        ("eq", re.compile(rf"(?P<flag>{f})=(?P<val>{tok})")),
        # --flag value   (whitespace may include a backslash-newline)
        ("space", re.compile(rf"(?P<flag>{f}){end}(?P<sep>(?:[ \t]|\\\n)+)(?P<val>(?!--){tok})")),
    ]
    bare = re.compile(rf"""(?P<flag>{f}){end}""")
    for name, rx in forms:
        hits = list(rx.finditer(text))
        if len(hits) > 1:
            raise EditError(f"{flag} is given {len(hits)} times; edit the file by hand")
        if hits:
            m = hits[0]
            if value is None:
                return text  # a switch that is present already
            if name == "list":
                quote = m.group("val")[0]
                inner = json.dumps(value)[1:-1] if quote == '"' else value.replace("'", "''")
                new_val = f"{quote}{inner}{quote}"
            elif name == "block":
                new_val = json.dumps(value)
            elif compose:
                new_val = _q_shell(value)
            else:
                new_val = _q_shell(value)
            return text[: m.start("val")] + new_val + text[m.end("val") :]
    if len(list(bare.finditer(text))) == 1 and value is None:
        return text
    if bare.search(text) and value is not None:
        raise EditError(f"{flag} is in the file in a form triage does not edit; change it by hand")
    return _insert_flag(text, flag, value, compose=compose)


def _insert_flag(text: str, flag: str, value: str | None, *, compose: bool) -> str:
    if compose:
        cmds = list(re.finditer(r"(?m)^(?P<ind>[ \t]*)command:[ \t]*(?P<rest>.*)$", text))
        if len(cmds) != 1:
            raise EditError(
                "the compose file has no vLLM command: key" if not cmds else f"the compose file has {len(cmds)} command: keys; edit it by hand"
            )
        m = cmds[0]
        rest = m.group("rest")
        pos = m.start("rest")
        if rest.startswith("["):  # command: ["--model", "x"]
            item = json.dumps(flag) + (", " + json.dumps(value) if value is not None else "")
            after = text[pos + 1 :]
            if after.lstrip(" ").startswith("]"):
                return text[: pos + 1] + item + after
            return text[: pos + 1] + item + ", " + after.lstrip(" ")
        if rest.strip() == "" or rest.strip() in ("|", ">", "|-", ">-"):
            after = text[m.end() :]
            nxt = re.match(r"\n(?P<ind>[ \t]+)(?P<dash>-[ \t]+)?", after)
            if not nxt:
                raise EditError("cannot find the items of the compose command:")
            ind = nxt.group("ind")
            if nxt.group("dash"):
                items = f"\n{ind}- {flag}" + (f"\n{ind}- {json.dumps(value)}" if value is not None else "")
                return text[: m.end()] + items + text[m.end() :]
            piece = flag + (" " + _q_shell(value) if value is not None else "")
            return text[: m.end()] + f"\n{ind}{piece}" + text[m.end() :]
        if rest[:1] in ("'", '"'):
            pos += 1
        piece = flag + (" " + _q_shell(value) if value is not None else "") + " "
        return text[:pos] + piece + text[pos:]
    launches = list(LAUNCH_RE.finditer(text))
    if not launches:
        raise EditError("no `vllm serve` command found in the file")
    if len(launches) > 1:
        raise EditError(f"the file launches vLLM {len(launches)} times; edit it by hand")
    m = launches[0]
    piece = " " + flag + (" " + _q_shell(value) if value is not None else "")
    return text[: m.end()] + piece + text[m.end() :]


def set_env(text: str, name: str, value: str, *, compose: bool) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise EditError(f"not an environment variable name: {name!r}")
    n = re.escape(name)
    if compose:
        hits = list(re.finditer(rf"(?m)^(?P<pre>[ \t]*-[ \t]+[\"']?{n}=)(?P<val>[^\"'\n]*)(?P<post>[\"']?)[ \t]*$", text))
        hits += list(re.finditer(rf"(?m)^(?P<pre>[ \t]+{n}:[ \t]*)(?P<val>.*?)(?P<post>)[ \t]*$", text))
        if len(hits) > 1:
            raise EditError(f"{name} is set {len(hits)} times; edit the file by hand")
        if hits:
            m = hits[0]
            new_val: str | None
            if m.group("pre").rstrip().endswith(":"):
                new_val = json.dumps(value)
            else:
                new_val = value if SAFE_VALUE.match(value) else None
                if new_val is None:
                    raise EditError(f"the value for {name} needs quoting that triage does not do in a list; set it by hand")
            assert new_val is not None
            return text[: m.start("val")] + new_val + text[m.end("val") :]
        envs = list(re.finditer(r"(?m)^(?P<ind>[ \t]*)environment:[ \t]*$", text))
        if len(envs) > 1:
            raise EditError("the compose file has several environment: blocks; edit it by hand")
        if envs:
            m = envs[0]
            nxt = re.match(r"\n(?P<ind>[ \t]+)(?P<dash>-[ \t]+)?", text[m.end() :])
            ind = nxt.group("ind") if nxt else m.group("ind") + "  "
            if nxt is None or nxt.group("dash"):
                line = f"\n{ind}- {name}={value}" if SAFE_VALUE.match(value) else None
                if line is None:
                    raise EditError(f"the value for {name} needs quoting that triage does not do in a list; set it by hand")
            else:
                line = f"\n{ind}{name}: {json.dumps(value)}"
            return text[: m.end()] + line + text[m.end() :]
        cmds = list(re.finditer(r"(?m)^(?P<ind>[ \t]*)command:", text))
        if len(cmds) != 1:
            raise EditError("cannot tell which service runs vLLM; edit the compose file by hand")
        ind = cmds[0].group("ind")
        block = f"{ind}environment:\n{ind}  {name}: {json.dumps(value)}\n"
        return text[: cmds[0].start()] + block + text[cmds[0].start() :]
    quoted = _q_shell(value)
    lines = list(re.finditer(rf"(?m)^(?P<pre>[ \t]*(?:export[ \t]+)?{n}=)(?P<val>\S*)[ \t]*$", text))
    inline = list(re.finditer(rf"(?<![\w$])(?P<pre>{n}=)(?P<val>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)(?=[ \t]+\S)", text))
    hits = lines or inline
    if len(hits) > 1:
        raise EditError(f"{name} is set {len(hits)} times; edit the file by hand")
    if hits:
        m = hits[0]
        return text[: m.start("val")] + quoted + text[m.end("val") :]
    launches = list(LAUNCH_RE.finditer(text))
    if len(launches) != 1:
        raise EditError("no single `vllm serve` command found in the file" if not launches else "the file launches vLLM several times; edit it by hand")
    line_start = text.rfind("\n", 0, launches[0].start()) + 1
    rest = text[line_start:]
    ind = rest[: len(rest) - len(rest.lstrip(" \t"))]
    return text[:line_start] + f"{ind}export {name}={quoted}\n" + text[line_start:]


def unified_diff(path: str, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), fromfile=f"{path} (now)", tofile=f"{path} (after)")
    )
