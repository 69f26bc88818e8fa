"""Decode what a vLLM version string says about how that vLLM was built.

vLLM takes its version from setuptools-scm (default `guess-next-dev` scheme) and `setup.py` may append
a local suffix (`cu129`, `precompiled`, `cpu`, ...). So the string alone tells a release from a build
of main, how far past which tag, at which commit, for which CUDA, and whether the tree was dirty:

    0.11.0                       release
    0.11.0+cu126                 release, built for CUDA 12.6 instead of the default
    0.16.0rc2                    release candidate
    0.16.0rc2.dev313+g662205d34  main, 313 commits after the tag v0.16.0rc1, commit 662205d34 (nightly /
                                 per-commit wheel or a docker dev image)
    0.7.1.dev44+gbd2107e3.d20250131  a local build with uncommitted changes (dated 2025-01-31)
    0.1.dev20051+g487ecf187      built from a checkout without tags (fork, shallow clone)
    0.13.0+faa43dbf.nv26.01      NVIDIA NGC container 26.01
    dev                          `_version.py` missing: a source tree that was never built

guess-next-dev bumps the last number of the latest tag, so `X.Y.ZrcN.devM` counts M commits after
`vX.Y.ZrcN-1` and `X.Y.Z.devM` after `vX.Y.Z-1`; where that inverse is not defined, after_tag is None.
The log scan decodes versions found in logs with it; everything that compares versions uses `Version`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from triage.lazyre import lazy

# --- ordering ---------------------------------------------------------------------------------
# One ordering for every version triage compares (playbook conditions, the upgrade advice, the
# explanations): PEP 440 as `packaging.version.Version` orders it, without importing packaging.

_VERSION = lazy(
    r"""^\s*v?
    (?:(?P<epoch>\d+)!)?
    (?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>a|b|c|rc|alpha|beta|pre|preview)[-_.]?(?P<pre_n>\d+)?)?
    (?:(?:-(?P<post_n1>\d+))|(?:[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?))?
    (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$""",
    re.VERBOSE | re.IGNORECASE,
)
_PRE_ORDER = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_INF = float("inf")
_SPEC = lazy(r"^(>=|<=|==|!=|>|<)\s*(.+)$")


class InvalidVersion(ValueError):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class Version:
    """A PEP 440 version, ordered as `packaging.version.Version` orders them.

    `0.16.0rc2.dev313+g662205d34` < `0.16.0rc2` < `0.16.0` < `0.16.0.post1`; `0.16.0.dev5` sorts
    before every pre-release of 0.16.0. Local labels (`+cu129`, `+g662205d34`) only break ties.
    Trailing zeros do not matter: 12 == 12.0 == 12.0.0.
    """

    text: str
    key: tuple

    @classmethod
    def parse(cls, text: Any) -> Version:
        s = str(text)
        m = _VERSION.match(s)
        if not m:
            raise InvalidVersion(f"not a version: {s!r}")
        release = tuple(int(p) for p in m.group("release").split("."))
        while len(release) > 1 and release[-1] == 0:
            release = release[:-1]
        pre = None
        if m.group("pre_l"):
            pre = (_PRE_ORDER[m.group("pre_l").lower()], int(m.group("pre_n") or 0))
        post = None
        if m.group("post_n1") or m.group("post_l"):
            post = int(m.group("post_n1") or m.group("post_n2") or 0)
        dev = int(m.group("dev_n") or 0) if m.group("dev_l") else None
        local = m.group("local")
        # The sort key of packaging: a dev release of X sorts before X's pre-releases.
        if pre is None and post is None and dev is not None:
            pre_k: tuple = (-_INF,)
        elif pre is None:
            pre_k = (_INF,)
        else:
            pre_k = pre
        post_k: tuple = (-_INF,) if post is None else (post,)
        dev_k: tuple = (_INF,) if dev is None else (dev,)
        if local is None:
            local_k: tuple = ((-_INF, ""),)
        else:
            local_k = tuple((int(p), "") if p.isdigit() else (-_INF, p.lower()) for p in re.split(r"[-_.]", local))
        return cls(s, (int(m.group("epoch") or 0), release, pre_k, post_k, dev_k, local_k))

    @property
    def release(self) -> tuple[int, ...]:
        return self.key[1]

    @property
    def is_prerelease(self) -> bool:
        return self.key[2] != (_INF,) or self.key[4] != (_INF,)

    def __lt__(self, other: Version) -> bool:
        return self.key < other.key

    def __le__(self, other: Version) -> bool:
        return self.key <= other.key

    def __gt__(self, other: Version) -> bool:
        return self.key > other.key

    def __ge__(self, other: Version) -> bool:
        return self.key >= other.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return self.text


def parse(v: Any) -> Version | None:
    """The Version of `v`, or None when it is not one (`dev`, a git hash, nothing)."""
    try:
        return Version.parse(v) if v is not None else None
    except InvalidVersion:
        return None


def compare_versions(a: Any, b: Any) -> int:
    """-1, 0 or 1; raises InvalidVersion when either side is not a version."""
    va, vb = Version.parse(a), Version.parse(b)
    return (va > vb) - (va < vb)


def is_prerelease(v: Any) -> bool:
    p = parse(v)
    return p is not None and p.is_prerelease


def lt(a: Any, b: Any) -> bool:
    """a < b; False when either is not a version."""
    pa, pb = parse(a), parse(b)
    return pa is not None and pb is not None and pa < pb


def ge(a: Any, b: Any) -> bool:
    """a >= b; False when either is not a version."""
    pa, pb = parse(a), parse(b)
    return pa is not None and pb is not None and pa >= pb


def sort_versions(vs: list[str]) -> list[str]:
    """Ascending; strings that are not versions are dropped."""
    keyed = [(p, v) for v in vs if (p := parse(v)) is not None]
    return [v for _p, v in sorted(keyed, key=lambda pv: (pv[0].key, pv[1]))]


def satisfies(v: Any, spec: str) -> bool | None:
    """`v` against a simple specifier list like ">=0.6.14,<0.7"; None when either is unreadable."""
    a = parse(v)
    if a is None:
        return None
    for part in spec.split(","):
        m = _SPEC.match(part.strip())
        b = parse(m.group(2)) if m else None
        if m is None or b is None:
            return None
        ok = {">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b, "==": a == b, "!=": a != b}[m.group(1)]
        if not ok:
            return False
    return True


# --- decoding what a vLLM version says about its build ---------------------------------------

_PEP440 = lazy(
    r"""^v?(?P<release>\d+(?:\.\d+)*)
        (?:(?P<pre_l>a|b|rc)(?P<pre_n>\d+))?
        (?:\.post(?P<post>\d+))?
        (?:\.dev(?P<dev>\d+))?
        (?:\+(?P<local>[A-Za-z0-9.]+))?$""",
    re.X,
)
_GIT = lazy(r"^g([0-9a-f]{7,40})$", needles=("g",))
_HEX = lazy(r"^[0-9a-f]{7,40}$")
_DIRTY = lazy(r"^d(\d{4})(\d{2})(\d{2})$", needles=("d",))
_CUDA = lazy(r"^cu(\d{2,3})$", needles=("cu",))
_ROCM = lazy(r"^rocm(\d+)$", needles=("rocm",))
_NGC = lazy(r"(?:^|\.)nv(\d{2})\.(\d{2})(?:\.|$)", needles=("nv",))
_PLATFORMS = {"cpu", "tpu", "xpu", "hpu", "neuron", "empty"}


def cuda_from_tag(tag: str) -> str | None:
    """`cu129` -> `12.9`, `cu126` -> `12.6`, `cu118` -> `11.8`, `cu130` -> `13.0`."""
    m = _CUDA.match(tag)
    if not m:
        return None
    digits = m.group(1)
    return f"{digits[:-1]}.{digits[-1]}"


def _previous_tag(release: str, pre_l: str | None, pre_n: str | None) -> str | None:
    """Invert guess-next-dev's bump of the last number; None when it was 0 (the tag is not knowable)."""
    if pre_l:
        n = int(pre_n or 0)
        return f"v{release}{pre_l}{n - 1}" if n > 0 else None
    parts = release.split(".")
    last = int(parts[-1])
    if last == 0:
        return None
    parts[-1] = str(last - 1)
    return "v" + ".".join(parts)


def decode_vllm_version(s: str) -> dict[str, Any]:
    """Decode a vLLM version string into what it says about the build (see the module docstring).

    Keys: version (as given), kind (release|rc|nightly|dev|ngc|local|unknown), base (the public
    version before `.devN` and `+local`), dev_commits, after_tag, commit, dirty_date, local_suffix,
    cuda (from a cuXYZ suffix), precompiled, ngc_release, platform, summary (one line for people).
    """
    raw = (s or "").strip()
    out: dict[str, Any] = {
        "version": raw,
        "kind": "unknown",
        "base": None,
        "dev_commits": None,
        "after_tag": None,
        "commit": None,
        "dirty_date": None,
        "local_suffix": None,
        "cuda": None,
        "precompiled": False,
        "ngc_release": None,
        "platform": None,
        "summary": "",
    }
    if raw in ("dev", "N/A (dev)", "0.0.0.dev0"):
        out.update(kind="dev", summary="development source tree without a built version (vllm/_version.py missing)")
        return out
    m = _PEP440.match(raw)
    if not m:
        out["summary"] = f"unrecognised version string {raw!r}"
        return out
    release, pre_l, pre_n = m.group("release"), m.group("pre_l"), m.group("pre_n")
    base = release + (f"{pre_l}{pre_n}" if pre_l else "") + (f".post{m.group('post')}" if m.group("post") else "")
    out["base"] = base
    local = m.group("local")
    out["local_suffix"] = local
    other_local: list[str] = []
    if local:
        ngc = _NGC.search(local)
        if ngc:
            out["ngc_release"] = f"{ngc.group(1)}.{ngc.group(2)}"
            local_rest = _NGC.sub(".", local).strip(".")
        else:
            local_rest = local
        for seg in [p for p in local_rest.split(".") if p]:
            if git := _GIT.match(seg):
                out["commit"] = git.group(1)
            elif out["ngc_release"] and _HEX.match(seg):
                out["commit"] = seg
            elif dirty := _DIRTY.match(seg):
                y, mo, d = dirty.groups()
                out["dirty_date"] = f"{y}-{mo}-{d}"
            elif _CUDA.match(seg):
                out["cuda"] = cuda_from_tag(seg)
            elif seg == "precompiled":
                out["precompiled"] = True
            elif _ROCM.match(seg) or seg in _PLATFORMS:
                out["platform"] = seg
            else:
                other_local.append(seg)
    dev = m.group("dev")
    if dev is not None:
        out["dev_commits"] = int(dev)
        out["after_tag"] = None if release in ("0.1", "0.0") else _previous_tag(release, pre_l, pre_n)

    # Kind, most specific first.
    if out["ngc_release"]:
        kind = "ngc"
    elif dev is not None and (out["dirty_date"] or out["commit"] is None or release in ("0.1", "0.0")):
        kind = "dev"
    elif dev is not None:
        kind = "nightly"
    elif out["precompiled"] or other_local or out["commit"] or out["dirty_date"]:
        kind = "local"
    elif pre_l:
        kind = "rc"
    else:
        kind = "release"
    out["kind"] = kind
    out["summary"] = _summary(out)
    return out


def _summary(d: dict[str, Any]) -> str:
    kind = d["kind"]
    bits: list[str] = []
    if kind == "release":
        bits.append(f"release {d['base']}")
    elif kind == "rc":
        bits.append(f"release candidate {d['base']}")
    elif kind == "ngc":
        bits.append(f"NVIDIA NGC container {d['ngc_release']} build of vLLM {d['base']}")
    elif kind == "nightly":
        bits.append(f"build of main, {d['dev_commits']} commits after "
                    f"{d['after_tag'] or 'the last tag'} (nightly or per-commit wheel, or a dev image)")
    elif kind == "dev":
        if d["base"] in ("0.1", "0.0"):
            bits.append("built from a checkout without release tags (fork or shallow clone)")
        else:
            bits.append(f"local development build, {d['dev_commits']} commits after {d['after_tag'] or 'the last tag'}")
    elif kind == "local":
        bits.append(f"locally built {d['base']}")
    if d["commit"]:
        bits.append(f"commit {d['commit']}")
    if d["dirty_date"]:
        bits.append(f"with uncommitted changes ({d['dirty_date']})")
    if d["cuda"]:
        bits.append(f"for CUDA {d['cuda']}")
    if d["precompiled"]:
        bits.append("Python-only install over precompiled binaries (VLLM_USE_PRECOMPILED)")
    if d["platform"]:
        bits.append(f"for {d['platform']}")
    return ", ".join(bits)
