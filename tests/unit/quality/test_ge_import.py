"""Great Expectations is imported in the background while a validation reads its window.

Broker-free: each case in a fresh interpreter, where nothing has imported GE yet.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from eos_etl.quality import ge_import  # here only for its name: each case imports it in a fresh interpreter


def _run(code: str) -> subprocess.CompletedProcess:
    code = textwrap.dedent(code).replace("MODULE", ge_import.__name__)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_import_runs_beside_the_caller_and_loads_what_the_validation_uses():
    proc = _run("""
        import sys, threading
        import MODULE as ge_import
        assert "great_expectations" not in sys.modules
        ge_import.start_importing_great_expectations()
        importing = [t.name for t in threading.enumerate() if t.name == "gx-import"]
        ge_import.start_importing_great_expectations()  # a second start starts nothing more
        extra = [t.name for t in threading.enumerate() if t.name == "gx-import"]
        ge_import.await_great_expectations()
        loaded = [m for m in ("great_expectations", "eos_etl.quality.expectations",
                              "eos_etl.quality.spark_views", "eos_etl.quality.checkpoint_actions")
                  if m in sys.modules]
        print(importing, extra, loaded)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["['gx-import']", "['gx-import']", "['great_expectations',",
                                   "'eos_etl.quality.expectations',", "'eos_etl.quality.spark_views',",
                                   "'eos_etl.quality.checkpoint_actions']"]


def test_a_failed_background_import_fails_again_where_the_module_is_used():
    proc = _run("""
        import sys
        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name == "great_expectations":
                    raise ImportError("no great_expectations here")
        sys.meta_path.insert(0, Refuse())
        import MODULE as ge_import
        ge_import.start_importing_great_expectations()
        ge_import.await_great_expectations()
        try:
            import great_expectations
        except ImportError as e:
            print("raised:", e)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "raised: no great_expectations here"
    assert "Traceback" not in proc.stderr  # the thread's failure is not printed as an unhandled one
