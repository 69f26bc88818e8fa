"""A ticket pastes its traceback in a Markdown code block and goes on in prose: the block's closing fence
right after the last frame is where the paste ends, so the traceback was cut there, whatever prose follows."""

from __future__ import annotations

from triage.logread import scan_path, scan_text

FRAMES = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/multiprocessing/context.py", line 289, in _Popen',
    "    return Popen(process_obj)",
    '  File "/usr/lib/python3.12/multiprocessing/popen_spawn_posix.py", line 32, in __init__',
    "    super().__init__(process_obj)",
]
PROSE = ["", "Any idea what is wrong here? It worked yesterday with the same script and the same model,", "",
         "thanks."]


def _paste(fence: str = "```", indent: str = "") -> str:
    return "\n".join(["I run the script below and get:", "", indent + fence + "python"]
                     + [indent + f for f in FRAMES] + [indent + fence] + PROSE) + "\n"


def test_a_block_closed_after_the_last_frame_ends_the_paste_there():
    for fence, indent in (("```", ""), ("```", "  "), ("~~~", "")):
        s = scan_text(_paste(fence, indent))
        assert len(s.cut_tracebacks) == 1, (fence, indent)
        assert s.cut_tracebacks[0].frames[-1].file.endswith("popen_spawn_posix.py")


def test_the_same_through_the_file_reader(tmp_path):
    p = tmp_path / "ticket.md"
    p.write_text(_paste())
    assert len(scan_path(str(p)).cut_tracebacks) == 1


def test_a_block_that_goes_on_after_the_frames_is_not_cut_by_a_later_fence():
    # the frames, then the process went on printing inside the block: the fence is not where it was cut
    text = "\n".join(["```"] + FRAMES + ["INFO 11-29 20:52:18 [core.py:1] still loading", "INFO more",
                                         "INFO more", "INFO more", "```"] + PROSE) + "\n"
    assert scan_text(text).cut_tracebacks == []


def test_without_a_fence_prose_after_the_frames_still_reads_as_no_cut():
    text = "\n".join(FRAMES + PROSE) + "\n"
    assert scan_text(text).cut_tracebacks == []
