"""Every relative link of the README and the docs pages names a file that exists and a heading it has."""

import subprocess
import sys

from tests.support import ROOT


def test_readme_and_docs_links_resolve():
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_doc_links.py")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert " 0 broken" in res.stdout and not res.stdout.startswith("0 relative links"), res.stdout


def test_the_checker_reports_a_broken_link(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import check_doc_links
    finally:
        sys.path.pop(0)
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [missing](nowhere.md) [bad anchor](#no-such-heading)\n")
    checked, broken = check_doc_links.check([page])
    assert checked == 3 and len(broken) == 2, broken
