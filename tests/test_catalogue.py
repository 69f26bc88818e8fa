"""The mined message catalogue: the miner on real source, the shipped data's integrity, the matcher on
real messages, the module -> category map, cut tracebacks, and release ranges as upgrade evidence."""

from __future__ import annotations

import gzip
import importlib.util
import json
import zipfile
from pathlib import Path

import pytest
from conftest import run_triage

from triage import areas
from triage.catalogue import store
from triage.areas import area_of, category_for
from triage.diagnose import diagnose
from triage.logread import scan_text
from triage.logread.traceback import Frame, phase_of
from triage.model import CATEGORIES, Diagnosis
from triage.upstream import advisor
from triage.upstream.facets import Facets

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("mine_messages", ROOT / "scripts" / "mine_messages.py")
miner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(miner)
H = miner.HOLE


# --- the miner, on source as vLLM wrote it ------------------------------------------------------

# vllm 0.33.0, v1/core/kv_cache_planning.py (a local variable in the middle of the f-string chain).
KV_SRC = '''
def check_enough_kv_cache_memory(vllm_config, available_memory, max_model_len):
    needed_memory = get_needed_memory()
    if needed_memory > available_memory:
        estimated_max_len = estimate_max_model_len(available_memory)
        estimated_msg = ""
        raise ValueError(
            f"To serve at least one request with the model's max seq len "
            f"({max_model_len}), ({format_gib(needed_memory)} GiB KV "
            f"cache is needed, which is larger than the available KV cache "
            f"memory ({format_gib(available_memory)} GiB). {estimated_msg}"
            f"Try increasing `gpu_memory_utilization` (which also controls "
            f"CPU memory on the CPU backend) or decreasing `max_model_len` "
            f"when initializing the engine. "
        )
'''

# vllm 0.33.0, model_executor/layers/quantization/fp8.py and platforms/cuda.py; the %-format logger
# call and the msg variable as vLLM 0.8 writes them (config.py, worker.py).
MIXED_SRC = '''
import logging
logger = logging.getLogger(__name__)

class Fp8Config:
    def __init__(self, is_checkpoint_fp8_serialized):
        if not is_checkpoint_fp8_serialized:
            raise ValueError(
                "The `fp8` quantization method no longer supports online "
                "quantization. Please use `--quantization fp8_per_tensor` "
                "instead. See "
                "https://docs.vllm.ai/en/stable/features/quantization/online/"
            )

def pin_memory():
    logger.warning(
        "Using 'pin_memory=False' as WSL is detected and the "
        "WSL2 kernel version is below 4.19.121. This may slow "
        "down performance. Please run `wsl --update`."
    )

def verify(tp, dcp, total_num_attention_heads, tensor_parallel_size):
    if tp % dcp != 0:
        raise ValueError(f"tp_size={tp} must be divisible by dcp_size={dcp}.")
    if total_num_attention_heads % tensor_parallel_size != 0:
        msg = ("Total number of attention heads ({}) must be divisible by tensor parallel size ({})."
               .format(total_num_attention_heads, tensor_parallel_size))
        raise ValueError(msg)
    logger.error("Error in model execution (input dumped to %s): %s", "/tmp/x", "err")
    assert tp > 0, f"tensor parallel size must be positive, got {tp}"
    raise RuntimeError("x")  # too short to recognise: dropped
'''


def test_miner_turns_fstrings_with_locals_into_templates():
    found = miner.mine_source(KV_SRC)
    assert len(found) == 1
    kind, t = found[0]
    assert kind == "ValueError"
    assert t.startswith(f"To serve at least one request with the model's max seq len ({H}), ({H} GiB KV cache is needed")
    # estimated_msg is a hole (its value is not the empty first assignment's literal text)
    assert f"GiB). {H}Try increasing" in t or f"GiB).{H}Try increasing" in t or "GiB). Try increasing" in t


def test_miner_reads_every_message_form():
    found = dict((t, k) for k, t in miner.mine_source(MIXED_SRC))
    assert found["The `fp8` quantization method no longer supports online quantization. Please use "
                 "`--quantization fp8_per_tensor` instead. See "
                 "https://docs.vllm.ai/en/stable/features/quantization/online/"] == "ValueError"
    assert any(k == "WARNING" and t.startswith("Using 'pin_memory=False' as WSL") for t, k in found.items())
    assert found[f"tp_size={H} must be divisible by dcp_size={H}."] == "ValueError"
    assert found[f"Total number of attention heads ({H}) must be divisible by tensor parallel size ({H})."] \
        == "ValueError"
    assert found[f"Error in model execution (input dumped to {H}): {H}"] == "ERROR"
    assert found[f"tensor parallel size must be positive, got {H}"] == "AssertionError"
    assert "x" not in found
    assert len(found) == 6


def test_miner_keeps_release_ranges_and_builds_a_consistent_index(tmp_path):
    old, new = tmp_path / "vllm-0.1.0-py3-none-any.whl", tmp_path / "vllm-0.2.0-py3-none-any.whl"
    with zipfile.ZipFile(old, "w") as z:
        z.writestr("vllm/a.py", 'def f():\n    raise ValueError("the old message that went away")\n')
        z.writestr("vllm/tests/t.py", 'raise ValueError("a message only a test raises")\n')
    with zipfile.ZipFile(new, "w") as z:
        z.writestr("vllm/a.py", 'def f():\n    raise ValueError(f"a brand new message about {x} things")\n')
    cat = miner.Catalogue()
    cat.add_release("vllm", "0.1.0", miner.iter_wheel(old, "vllm"))
    cat.add_release("vllm", "0.2.0", miner.iter_wheel(new, "vllm"))
    data = cat.to_json()
    rows = {e[3]: (e[4], e[5]) for e in data["entries"]}
    assert rows == {"the old message that went away": (0, 0), f"a brand new message about {H} things": (1, 1)}
    out = tmp_path / "m.json.gz"
    out.write_bytes(gzip.compress(miner.serialise(data)))
    c = store.load(str(out))
    (m,) = c.match("ValueError: a brand new message about 12 things")
    assert (m.template.first, m.template.last, m.template.newest) == ("0.2.0", "0.2.0", "0.2.0")
    assert c.match("ValueError: the old message that went away")[0].template.last == "0.1.0"


# --- the shipped data ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cat():
    c = store.load()
    assert c is not None, "triage/catalogue/messages.json.gz is missing or unreadable"
    return c


def test_shipped_catalogue_is_consistent(cat):
    assert len(cat) > 10000
    assert "vllm" in cat.packages
    vllm = cat.releases[cat.packages.index("vllm")]
    assert vllm[0].startswith("0.6.") and vllm[-1] == "0.33.0"
    for lib in ("transformers", "huggingface_hub", "flashinfer", "triton", "torch", "safetensors", "ray"):
        assert lib in cat.packages, lib
    per: dict[int, int] = {}
    for word in cat.index:
        ids = cat.ids(word)
        assert ids and len(ids) == len(set(ids))
        for i in ids:
            per[i] = per.get(i, 0) + 1
    assert max(per.values()) <= 2  # under its rarest word and its first piece's rarest word
    assert len(per) > 0.95 * len(cat)
    for word in list(cat.index)[::50]:
        for i in cat.ids(word):
            t = cat.template(i)
            assert word in miner.key_words(t.text), (word, t.text)
    for i in range(0, len(cat), 97):
        p, m, k, a, b, text = cat.row(i)
        assert 0 <= a <= b < len(cat.releases[p])
        assert 0 <= m < len(cat.modules) and 0 <= k < len(cat.kinds)
        assert miner.worth_keeping(text)


# Real messages, as real threads (tests/logs/unseen, shared dev-cases) quote them.
REAL = [
    ("ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is "
     "needed, which is larger than the available KV cache memory (9.5 GiB). Based on the available memory, the "
     "estimated maximum model length is 77776. Try increasing `gpu_memory_utilization` or decreasing "
     "`max_model_len` when initializing the engine.", "kv_cache_memory", "vllm/v1/core/kv_cache"),
    ("ValueError: The `fp8` quantization method no longer supports online quantization. Please use "
     "`--quantization fp8_per_tensor` instead.", "quantization", "vllm/model_executor/layers/quantization/"),
    ("ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3).",
     "engine_config", "vllm/config"),
]


@pytest.mark.parametrize("line,category,module", REAL)
def test_matcher_on_real_messages(cat, line, category, module):
    ms = cat.match(line)
    assert ms, line
    assert any(m.template.module.startswith(module) for m in ms[:5]), [m.template.module for m in ms[:5]]
    assert category_for(ms[0].template.module, line, line.split(":", 1)[0]) == category


def test_a_fragment_cut_short_still_matches(cat):
    ms = cat.match("To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is")
    assert ms and ms[0].share < 1 and "kv_cache" in ms[0].template.module


# --- where code lives -> category ---------------------------------------------------------------

@pytest.mark.parametrize("path,category", [
    ("vllm/model_executor/layers/quantization/awq_marlin.py", "quantization"),
    ("/usr/lib/python3/dist-packages/vllm/v1/spec_decode/eagle.py", "speculative_decoding"),
    ("vllm/spec_decode/spec_decode_worker.py", "speculative_decoding"),
    ("vllm/transformers_utils/config.py", "model_loading"),
    ("vllm/distributed/parallel_state.py", "distributed"),
    ("ray/_private/worker.py", "distributed"),
    ("/x/site-packages/xarray/core.py", None),
    ("flashinfer/jit/core.py", "kernel_library"),
    ("triton/compiler/compiler.py", "triton_compile"),
    ("transformers/models/auto/configuration_auto.py", "model_support"),
    ("transformers/tokenization_utils_base.py", "tokenizer_chat_template"),
    ("huggingface_hub/utils/_validators.py", "model_loading"),
    ("torch/cuda/graphs.py", "cudagraph_capture"),
    ("torch/distributed/distributed_c10d.py", "distributed"),
])
def test_area_of_module(path, category):
    assert area_of(path) == category


def test_keywords_decide_in_modules_that_hold_several_kinds():
    # vllm/config/model.py checks quantization, dtypes and architectures alike
    assert category_for("vllm/config/model.py", "Unknown quantization method: foo. Must be one of [...]") == "quantization"
    assert category_for("vllm/config/model.py", "The model's max seq len (32768) is larger than ...") == "engine_config"
    # a strong word beats even a specific module
    assert category_for("vllm/model_executor/models/llama.py", "NCCL error: unhandled system error") == "distributed"
    assert category_for("vllm/v1/worker/gpu_worker.py", "x", "torch.OutOfMemoryError") == "gpu_oom"
    assert set(c for _, c in areas.AREAS) <= set(CATEGORIES)
    # the chat front-end's per-request media count is the --limit-mm-per-prompt setting, not the template
    assert category_for("vllm/entrypoints/chat_utils.py", "At most 1 image(s) may be provided in one request.") \
        == "engine_config"
    assert category_for("vllm/entrypoints/chat_utils.py", "Cannot use chat template functions") \
        == "tokenizer_chat_template"
    assert category_for("vllm/v1/engine/processor.py", "Token id 151935 is out of vocabulary") \
        == "tokenizer_chat_template"
    # Triton's front-end refusing an FP8 type this GPU lacks
    assert category_for("triton/language/core.py", "type fp8e4nv not supported in this architecture. The supported "
                        "fp8 dtypes are ('fp8e4b15', 'fp8e5')") == "dtype_unsupported"


def test_only_the_messages_own_words_decide_not_the_values_in_its_holes():
    """A model path under /dev/shm fills a hole of "The model `…` does not exist.": it names no shared-memory
    failure. A message that ends with a value (`: {e}`) keeps it: there the value is the underlying error."""
    from triage.catalogue.infer import diagnose_unknown

    def top(text):
        return diagnose_unknown(scan_text(text), set(), lambda _t: False)

    d = top("Error code: 404 - {'object': 'error', 'message': 'The model `/dev/shm/glm-4-9b-chat/` does not exist.', "
            "'type': 'NotFoundError', 'code': 404}\n")
    assert d is not None and d.facts["catalogue"]["template"] == "The model `…` does not exist."
    assert d.category == "engine_config", d.explanation
    t = store.load().match("The model `x` does not exist.")[0].template
    from triage.catalogue.infer import _own_words

    assert _own_words(t, "The model `/dev/shm/x` does not exist.") == " ".join(t.pieces)
    opened = next(m.template for m in store.load().match("Failed to import from vllm._C with ModuleNotFoundError("
                                                         "\"No module named 'vllm._C'\")") if m.template.open_end)
    assert "vllm._C" in _own_words(opened, "Failed to import from vllm._C with ModuleNotFoundError(...)")


# --- frames decide when the message is cut ------------------------------------------------------

CUT_LOG = """\
INFO 05-02 10:11:12 [gpu_model_runner.py:1500] Model loading took 14.2 GiB and 20.1 seconds
(EngineCore_0 pid=311) ERROR 05-02 10:11:40 [core.py:700] EngineCore failed to start.
(EngineCore_0 pid=311) ERROR 05-02 10:11:40 [core.py:700] Traceback (most recent call last):
(EngineCore_0 pid=311) ERROR 05-02 10:11:40 [core.py:700]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 691, in run_engine_core
(EngineCore_0 pid=311) ERROR 05-02 10:11:40 [core.py:700]     engine_core = EngineCoreProc(*args, **kwargs)
(EngineCore_0 pid=311) ERROR 05-02 10:11:40 [core.py:700]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 330, in compile_or_warm_up_model
(EngineCore_0 pid=311) ERROR 05-02 10:11:40 [core.py:700]     self.model_runner._dummy_run(size)
(EngineCore_0 pid=311) ERROR 05-02 10:11:40 [core.py:700]   File "/usr/local/lib/python3.12/dist-packages/flashinfer/jit/core.py", line 120, in build_and_load
(EngineCore_0 pid=311) ERROR 05-02 10:11:40 [core.py:700]     run_ninja(self.build_dir, self.ninja_path, verbose)
(EngineCore_0 pid=311) ERROR 05-02 10:11:40 [core.py:700]   File "/usr/local/lib/python3.12/dist-packages/flashinfer/jit/cpp_ext.py", line 283, in run_ninja
(EngineCore_0 pid=311) ERROR 05-02 10:11:40 [core.py:700]     subprocess.run(command, cwd=workdir, check=True)
"""


def test_a_traceback_cut_before_its_message_is_diagnosed_from_its_frames():
    scan = scan_text(CUT_LOG)
    assert scan.cut_tracebacks and not [e for e in scan.exceptions if e.in_traceback]
    assert scan.facts["phase"] == "JIT compilation during warm-up"
    ds, _ = diagnose(scan)
    d = ds[0]
    assert d.signature == "catalogue.cut_traceback"
    assert d.category == "kernel_library"
    assert d.facts["phase"] == "JIT compilation during warm-up"
    assert "flashinfer/jit/cpp_ext.py" in d.facts["raised_at"]
    assert 0.35 < d.confidence < 0.6


def test_phase_from_frames():
    fr = lambda f, fn: Frame(f, 1, fn)  # noqa: E731
    assert phase_of([fr("/v/vllm/v1/worker/gpu_model_runner.py", "capture_model"),
                     fr("/v/vllm/v1/worker/gpu_model_runner.py", "_dummy_run")]) == "CUDA graph capture"
    assert phase_of([fr("/v/vllm/v1/worker/gpu_worker.py", "determine_available_memory"),
                     fr("/v/triton/compiler/compiler.py", "compile")]) == "JIT compilation during memory profiling"
    assert phase_of([fr("/v/vllm/model_executor/model_loader/default_loader.py", "load_weights")]) == "weight loading"
    assert phase_of([fr("/v/vllm/entrypoints/cli/main.py", "main")]) is None


# --- a message no hand rule knows ----------------------------------------------------------------

UNKNOWN_LOG = """\
INFO 11-02 09:00:01 [__init__.py:216] Automatically detected platform cuda.
(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", line 1300, in create_engine_config
(APIServer pid=1)     model_config = self.create_model_config()
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/fp8.py", line 107, in __init__
(APIServer pid=1)     raise ValueError(
(APIServer pid=1) ValueError: The `fp8` quantization method no longer supports online quantization. Please use `--quantization fp8_per_tensor` instead. See https://docs.vllm.ai/en/stable/features/quantization/online/
"""


def test_a_mined_message_becomes_a_diagnosis_between_rules_and_fallback():
    ds, _ = diagnose(scan_text(UNKNOWN_LOG))
    d = ds[0]
    assert d.signature.startswith("catalogue.vllm.model_executor.layers.quantization"), d.signature
    assert d.category == "quantization"
    assert 0.35 < d.confidence < 0.6
    assert d.facts["source"].startswith("raised in vllm/model_executor/layers/quantization/fp8.py (vllm ")
    assert d.facts["catalogue"]["last_release"] == "0.33.0"
    assert d.facts["phase"] == "argument checking"


def test_hand_rules_still_win_and_never_load_the_catalogue(monkeypatch):
    log = (ROOT / "triage" / "demo" / "glm5_sm120.log").read_text()
    monkeypatch.setattr(store, "_CATALOGUE", None)
    monkeypatch.setattr(store, "load", lambda *a, **k: pytest.fail("catalogue loaded"))
    ds, _ = diagnose(scan_text(log))
    assert ds[0].category == "attention_backend" and not ds[0].signature.startswith("catalogue.")


# --- release ranges as upgrade evidence ---------------------------------------------------------

def _cat_diag(first, last, absent=None, gone=None, newest="0.33.0"):
    facts = {"catalogue": {"package": "vllm", "module": "vllm/worker/worker.py", "kind": "ValueError",
                           "first_release": first, "last_release": last, "newest_release": newest,
                           "absent_in": absent, "gone_by": gone}}
    return Diagnosis("engine_config", "catalogue.vllm.worker.worker", "x", 0.5, facts=facts)


def _advise(diag, installed=None):
    env = {"vllm_version": installed} if installed else {}
    return advisor.advise(diag, env, Facets(), advisor.Available(), offline=True).to_json()


def test_a_message_gone_from_newer_releases_is_upgrade_evidence():
    out = _advise(_cat_diag("0.6.6.post1", "0.9.2", gone="0.10.2"), "0.8.5")
    line = next(e for e in out["evidence"] if "gone since" in e)
    assert "vLLM 0.10.2" in line and "vllm/worker/worker.py" in line and "scripts/mine_messages.py" in line
    assert out["verdict"] == "unknown"  # changed code is not proof of a fix


def test_a_message_still_in_the_newest_release_says_upgrading_alone_does_not_fix_it():
    out = _advise(_cat_diag("0.10.2", "0.33.0", absent="0.9.2"), "0.12.0")
    assert out["verdict"] == "does-not-fix"
    assert any("still in vLLM 0.33.0" in e for e in out["evidence"])


def test_a_message_the_installed_vllm_cannot_print_is_flagged():
    out = _advise(_cat_diag("0.20.2", "0.33.0", absent="0.19.1"), "0.11.0")
    assert out["verdict"] == "unknown"
    assert any("not in 0.19.1, and the installed vLLM is 0.11.0" in e for e in out["evidence"])
    # 0.20.0 may hold it: only the last patch of each minor release is mined
    assert _advise(_cat_diag("0.20.2", "0.33.0", absent="0.19.1"), "0.20.0")["verdict"] == "does-not-fix"
    out = _advise(_cat_diag("0.6.6.post1", "0.9.2", gone="0.10.2"), "0.12.0")
    assert any("a modified install or another package" in e for e in out["evidence"])


def test_the_pipeline_carries_release_ranges_to_the_upgrade_verdict(tmp_path):
    log = tmp_path / "v.log"
    log.write_text(UNKNOWN_LOG.replace("detected platform cuda.", "detected platform cuda.\n"
                                       "INFO 11-02 09:00:01 [api_server.py:1839] vLLM API server version 0.32.0"))
    res = run_triage("--log", str(log), "--json", "--offline", "--no-probe")
    out = json.loads(res.stdout)
    d = out["diagnoses"][0]
    assert d["category"] == "quantization" and d["facts"]["catalogue"]["last_release"] == "0.33.0"
    assert out["upgrade"]["verdict"] == "does-not-fix"
    assert any("still in vLLM 0.33.0" in e for e in out["upgrade"]["evidence"])


def test_catalogue_alone_names_the_category_of_real_threads():
    """Hand rules aside: where the catalogue matches a line of a log reconstructed from a real thread
    (tests/logs/unseen, the shared dev cases), the module map names the thread's category."""
    import yaml

    from triage.catalogue.infer import diagnose_unknown
    from triage.rules.wrappers import is_wrapper

    unseen = ROOT / "tests" / "logs" / "unseen"
    cases = []
    for f in ("expected.yaml", "expected-b.yaml", "expected-c.yaml"):
        if (unseen / f).exists():
            for name, e in yaml.safe_load((unseen / f).read_text()).items():
                if (unseen / name).exists() and e["category"] != "none":
                    cases.append((name, e["category"], (unseen / name).read_text()))
    dev = Path("/work/shared/dev-cases/cases.jsonl")
    if dev.exists():
        for ln in dev.read_text().splitlines():
            c = json.loads(ln)
            cases.append((c["id"], c["category"], c["log"]))
    matched, wrong = 0, []
    for name, want, text in cases:
        d = diagnose_unknown(scan_text(text), set(), is_wrapper)
        if d is None or not d.signature.startswith("catalogue.") or d.signature == "catalogue.cut_traceback":
            continue
        matched += 1
        if d.category != want:
            wrong.append((name, want, d.category, d.facts.get("source")))
    assert matched >= 50, matched
    assert len(wrong) <= 0.12 * matched, wrong


@pytest.mark.parametrize("line", [
    "IndexError: list index out of range",
    "TypeError: LlamaModel.__init__() got an unexpected keyword argument 'foo'",
    "TypeError: forward() takes 2 positional arguments but 3 were given",
])
def test_python_own_messages_name_no_library(line):
    # A template that is Python's own words around holes ("index {} out of range" in a Triton tool)
    # would pin any IndexError on that library.
    from triage.catalogue import store
    cat = store.load()
    assert cat is not None
    assert cat.match(line) == [], [(m.template.module, m.template.text) for m in cat.match(line)]
