"""nsysreport: where multi-GPU step time goes, from Nsight Systems and PyTorch profiler traces."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Name -> the module that defines it. Imported on first use: importing them all here would
# add 0.1 s (python -X importtime) to every `import nsysreport.<module>`, a worker process's
# and `python -m nsysreport.synth`'s too, since a package's __init__ runs first.
_API = {
    "analyse": "nsysreport.analysis",
    "open_report": "nsysreport.analysis",
    "Report": "nsysreport.model",
    "render_html": "nsysreport.render",
    "write_pdf": "nsysreport.render",
    "compare_reports": "nsysreport.compare",
    "Comparison": "nsysreport.compare",
    "gate_report": "nsysreport.gate",
    "GateResult": "nsysreport.gate",
    "Budget": "nsysreport.gate_budget",
    "Patterns": "nsysreport.patterns",
    "write_perfetto": "nsysreport.analysis",
    "NsysReportError": "nsysreport.errors",
}
__all__ = [  # the names of _API, spelled out for linters and type checkers
    "Budget",
    "Comparison",
    "GateResult",
    "NsysReportError",
    "Patterns",
    "Report",
    "__version__",
    "analyse",
    "compare_reports",
    "gate_report",
    "open_report",
    "render_html",
    "write_pdf",
    "write_perfetto",
]

if TYPE_CHECKING:
    from nsysreport.analysis import analyse, open_report, write_perfetto
    from nsysreport.compare import Comparison, compare_reports
    from nsysreport.errors import NsysReportError
    from nsysreport.gate import GateResult, gate_report
    from nsysreport.gate_budget import Budget
    from nsysreport.model import Report
    from nsysreport.patterns import Patterns
    from nsysreport.render import render_html, write_pdf


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'nsysreport' has no attribute {name!r}")
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value  # found here from now on, without this function
    return value
