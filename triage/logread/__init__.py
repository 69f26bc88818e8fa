"""Log intake: open, select, normalise, reassemble tracebacks, extract facts."""

from triage.logread.scan import Scan, Scanner, scan_path, scan_source, scan_text
from triage.logread.source import InputError, LogSource, open_source

__all__ = ["Scan", "Scanner", "scan_path", "scan_source", "scan_text", "InputError", "LogSource", "open_source"]
