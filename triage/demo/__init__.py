"""Bundled demo data: a recorded probe snapshot for `triage --demo`."""
