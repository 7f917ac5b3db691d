"""Pins numpy's floating-point configuration (dprl.floating_point) before any test or chapter
kernel loads numpy: chapters' kernels inherit this process's environment. At the end of a
session, lists the committed results whose bits this machine could not verify."""

import dprl  # noqa: F401

UNVERIFIABLE = "UNVERIFIABLE HERE: "


def pytest_terminal_summary(terminalreporter) -> None:
    reasons = sorted({str(report.longrepr[2]).split(UNVERIFIABLE, 1)[1]
                      for report in terminalreporter.stats.get("skipped", [])
                      if isinstance(report.longrepr, tuple)
                      and UNVERIFIABLE in str(report.longrepr[2])})
    if reasons:
        terminalreporter.section(f"{len(reasons)} committed results not verified on this machine")
        for reason in reasons:
            terminalreporter.line(reason)
