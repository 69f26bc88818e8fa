"""triage: diagnose failed vLLM launches.

The core (log intake, diagnosis, probes, upstream, playbooks) never imports Textual; the TUI in
triage.tui sits on top of it.
"""

__version__ = "0.1.0"
