"""The HTML report of a compiled bundle: ``write_report(bundle_dir, out_path, device_model="H100")``."""

from mlcc.report.html import render_report, write_report

__all__ = ["render_report", "write_report"]
