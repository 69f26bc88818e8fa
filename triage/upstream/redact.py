"""Remove what is private from text before it leaves the machine (search queries, bug reports).

Order matters: secrets first (a token inside a URL must not survive as a "host"), then e-mails,
URLs, IPs, paths (home paths name the user), then the names of this host and user wherever
they still appear. Each kind is replaced by a visible placeholder so a reader sees that
something was there and what kind of thing it was.
"""

from __future__ import annotations

import os
import re
from triage.lazyre import lazy
from typing import Iterable

# Secrets with a recognisable shape: GitHub, Hugging Face, OpenAI-style, Slack, AWS keys, JWTs,
# and any "token=..." / "Authorization: Bearer ..." pair. The needles (literals every match
# contains) spare compiling a pattern the text cannot match: see triage.lazyre.
_SECRET_PATTERNS = [
    lazy(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}\b", needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    lazy(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b", needles=("github_pat_",)),
    lazy(r"\bhf_[A-Za-z0-9]{20,}\b", needles=("hf_",)),
    lazy(r"\bsk-[A-Za-z0-9_-]{16,}\b", needles=("sk-",)),
    lazy(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b", needles=("xox",)),
    lazy(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", needles=("AKIA", "ASIA")),
    lazy(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b", needles=("eyJ",)),
]
_SECRET_ASSIGN = lazy(
    r"(?i)\b((?:[A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|ACCESS_KEY))\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|\S+)",
    needles=("token", "secret", "passw", "api_key", "apikey", "access_key"),
)
_BEARER = lazy(r"(?i)\b(bearer|token)\s+([A-Za-z0-9._~+/=-]{12,})", needles=("bearer", "token"))
_EMAIL = lazy(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b", needles=("@",))
_URL_CRED = lazy(r"(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+(?::[^/\s@]*)?@", needles=("://",))
_URL = lazy(r"\b(?:https?|ssh|ftp|s3|gs|hf)://[^\s'\"<>)\]]+", needles=("://",))
_IPV4 = lazy(r"(?<![\w.])(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}(?::\d{1,5})?(?![\w.])",
             needles=(".",))
# IPv6: five or more groups, or a "::" form; never a clock time like 10:12:44.
_IPV6 = lazy(
    r"(?<![\w:.])(?:(?:[0-9A-Fa-f]{1,4}:){4,7}[0-9A-Fa-f]{1,4}|(?:[0-9A-Fa-f]{1,4}:){1,7}(?::[0-9A-Fa-f]{1,4}){1,7}"
    r"|::(?:[0-9A-Fa-f]{1,4}:){0,5}[0-9A-Fa-f]{1,4})(?![\w:])",
    needles=(":",),
)
_PUBLIC_IPS = ("0.0.0.0", "127.0.0.1", "::1")
# A venv's path up to site-packages says nothing useful and may name the user: keep what follows.
_ENV_PATH = lazy(r"(?<![\w.:/])/[^\s'\"]*?/(site-packages|dist-packages)/", needles=("-packages/",))
# Home directories name their user; keep nothing of them.
_HOME = lazy(r"(?:/home|/Users|/export/home)/[^/\s'\"]+((?:/[^\s'\":,)\]]*)?)", needles=("/home/", "/Users/"))
_ROOT_HOME = lazy(r"(?<![\w.])/root(?=/|\b)((?:/[^\s'\":,)\]]*)?)", needles=("/root",))
# Other absolute paths: a venv's site-packages path says little, but a data or model directory
# can name a project or a customer. Keep the well-known system prefixes; redact the rest.
_ABS_PATH = lazy(r"(?<![\w.:/>])/(?:[A-Za-z0-9._@+-]+/)+[A-Za-z0-9._@+-]*", needles=("/",))
_SAFE_PREFIXES = (
    "/usr/", "/opt/conda/", "/opt/venv/", "/opt/nvidia/", "/lib/", "/lib64/", "/etc/", "/proc/", "/sys/",
    "/dev/", "/bin/", "/sbin/", "/tmp/", "/var/lib/", "/run/", "/.venv/", "/venv/",
)
# A fully qualified host name that is not a public service: four labels or more with an alphabetic
# TLD, or three ending in a TLD that names hosts (gpu-node-17.corp.internal, a.b.io), where a dotted
# code name (os.path.join) does not.
_HOST_TLDS = ("internal|local|localdomain|lan|corp|home|intranet|intra|cluster|private|priv|infra|svc|"
              "com|net|org|io|ai|dev|cloud|edu|gov|mil|biz|info|[a-z]{2}")
_FQDN = lazy(r"(?i)\b(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9-]+(?:(?:\.[A-Za-z0-9-]+){2,}\.[A-Za-z]{2,}"
             r"|\.[A-Za-z0-9-]+\.(?:" + _HOST_TLDS + r"))\b(?!\.\w)", needles=(".",))
# Environment variables whose values are secrets, whatever their shape (a short GITHUB_TOKEN too).
_SECRET_VAR = lazy(r"(?i)(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|CREDENTIAL)")
_PUBLIC_HOSTS = (
    "github.com", "githubusercontent.com", "huggingface.co", "pypi.org", "pythonhosted.org",
    "vllm.ai", "nvidia.com", "pytorch.org", "flashinfer.ai", "docker.io", "docker.com", "ngc.nvidia.com",
)
# Python dotted module names (vllm.v1.attention.backends) look like FQDNs; they are safe.
_MODULE_ROOTS = ("vllm.", "torch.", "triton.", "flashinfer.", "transformers.", "triage.", "deep_gemm.", "nvidia.")


def local_identities() -> list[str]:
    """This machine's host names and the current user's names, longest first."""
    names: set[str] = set()
    for value in _host_names():
        if value and value not in ("localhost", "localhost.localdomain"):
            names.add(value)
            names.add(value.split(".")[0])
    for var in ("USER", "LOGNAME", "USERNAME", "SUDO_USER"):
        if os.environ.get(var):
            names.add(os.environ[var])
    # getpass.getuser() answers the first of these that is set, else asks the password database
    # (done here without getpass, whose import costs start-up time).
    user = next((os.environ[v] for v in ("LOGNAME", "USER", "LNAME", "USERNAME") if os.environ.get(v)), None)
    if user:
        names.add(user)
    else:
        try:  # what getpass.getuser() does next, without importing getpass
            import pwd

            names.add(pwd.getpwuid(os.getuid())[0])
        except Exception:  # no pwd module (Windows) or no entry for this uid: no name
            pass
    # One- and two-letter names would redact half of every sentence; common words too.
    skip = {"root", "user", "admin", "ubuntu", "runner", "vllm", "cuda", "nvidia", "docker"}
    return sorted((n for n in names if len(n) >= 3 and n.lower() not in skip), key=len, reverse=True)


def _host_names() -> list[str]:
    """socket.gethostname() and socket.getfqdn(), each left out when it fails with OSError.

    Done with _socket, which the socket module wraps: importing socket (its enum set-up) and the
    idna codec that a str host name goes through cost more start-up than the rest of an offline
    report. getfqdn's own steps are repeated here unchanged."""
    import _socket

    try:
        host = _socket.gethostname()
    except OSError:
        return []
    out = [host]
    # An ASCII name of sane labels is what the idna codec would pass through unchanged.
    arg: str | bytes = host
    if host.isascii() and all(0 < len(label) < 64 for label in host.split(".")):
        arg = host.encode("ascii")
    try:
        hostname, aliases, _ = _socket.gethostbyaddr(arg)  # type: ignore[arg-type]  # bytes skip the idna codec
    except OSError:
        out.append(host)
    else:
        aliases.insert(0, hostname)
        out.append(next((n for n in aliases if "." in n), hostname))
    return out


def _path_repl(m: re.Match[str]) -> str:
    path = m.group(0)
    if path.startswith(_SAFE_PREFIXES) or "/site-packages/" in path or "/dist-packages/" in path:
        # Keep from site-packages on: that is what a maintainer needs (vllm/platforms/cuda.py).
        for marker in ("/site-packages/", "/dist-packages/"):
            if marker in path:
                return "<env>" + path[path.index(marker):]
        return path
    return "<path>"


def _fqdn_repl(m: re.Match[str]) -> str:
    host = m.group(0)
    low = host.lower()
    if low.startswith(_MODULE_ROOTS) or any(low == p or low.endswith("." + p) for p in _PUBLIC_HOSTS):
        return host
    # A dotted Python identifier or file name (config.json, model.safetensors.index.json)
    if low.endswith((".py", ".json", ".yaml", ".yml", ".txt", ".log", ".so", ".safetensors", ".gguf", ".bin",
                     ".gz", ".xz", ".zst", ".whl", ".md", ".cu", ".cc", ".cpp", ".sh", ".pt", ".pth", ".in", ".cfg")):
        return host
    return "<host>"


def _url_repl(m: re.Match[str]) -> str:
    url = m.group(0)
    host = re.sub(r"^[a-z0-9+.-]+://", "", url, flags=re.I).split("/")[0].split(":")[0].lower()
    if any(host == p or host.endswith("." + p) for p in _PUBLIC_HOSTS):
        return url
    return "<url>"


def active_secrets() -> list[str]:
    """The values of this process's secret-named environment variables (6 characters or more)."""
    return [v.strip() for k, v in os.environ.items() if _SECRET_VAR.search(k) and len(v.strip()) >= 6]


def redact(text: str, *, extra: Iterable[str] = (), identities: Iterable[str] | None = None) -> str:
    """Return `text` with secrets, e-mails, private URLs, IPs, local paths, host and user names replaced.

    `extra` adds literal strings to remove (a model path, a host name from an SSH target).
    `identities` overrides this machine's host and user names (tests pass their own).
    """
    if not text:
        return text
    out = text
    for secret in sorted(active_secrets(), key=len, reverse=True):
        out = out.replace(secret, "<token>")
    for pat in _SECRET_PATTERNS:
        out = pat.sub("<token>", out)
    out = _SECRET_ASSIGN.sub(lambda m: m.group(1) + "<token>", out)
    out = _BEARER.sub(lambda m: m.group(1) + " <token>", out)
    out = _URL_CRED.sub(lambda m: m.group(1), out)
    out = _EMAIL.sub("<email>", out)
    out = _URL.sub(_url_repl, out)
    out = _IPV4.sub(lambda m: m.group(0) if m.group(0).split(":")[0] in _PUBLIC_IPS else "<ip>", out)
    out = _IPV6.sub(lambda m: m.group(0) if m.group(0) in _PUBLIC_IPS else "<ip>", out)
    out = _ENV_PATH.sub(lambda m: f"<env>/{m.group(1)}/", out)
    out = _HOME.sub(lambda m: "~" + ("/<path>" if m.group(1) else ""), out)
    out = _ROOT_HOME.sub(lambda m: "~" + ("/<path>" if m.group(1) else ""), out)
    out = _ABS_PATH.sub(_path_repl, out)
    out = _FQDN.sub(_fqdn_repl, out)
    # Literals last: a host name inside an FQDN is already gone with the FQDN.
    for literal in sorted({e for e in extra if e and len(e) >= 3}, key=len, reverse=True):
        out = out.replace(literal, "<redacted>")
    names = list(identities) if identities is not None else local_identities()
    for name in names:
        if len(name) < 3 or name not in out:  # the pattern needs the name itself
            continue
        out = re.sub(r"(?<![A-Za-z0-9])" + re.escape(name) + r"(?![A-Za-z0-9])", "<name>", out)
    return out


def is_clean(text: str, *, identities: Iterable[str] | None = None) -> bool:
    """True when redact() would change nothing: used to check a query before it is sent."""
    return redact(text, identities=identities) == text
