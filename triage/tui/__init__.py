"""The TUI: guided triage in a terminal (over SSH), on top of the core.

`launcher.run` decides between the TUI and the plain report and prepares the terminal; `app.TriageApp`
is the Textual application. Nothing outside this package imports it, and nothing in it is imported by
the headless report.
"""
