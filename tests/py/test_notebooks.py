"""Executes every notebook in notebooks/ with nbconvert (the built cfgmask
package must be installed); a cell that raises fails the test.  Figures go
to a temporary directory ($CFGMASK_FIGURES)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no notebook"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(nb, tmp_path):
    env = dict(os.environ, CFGMASK_FIGURES=str(tmp_path / "figures"))
    r = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute",
                        "--ExecutePreprocessor.timeout=600", "--output-dir", str(tmp_path),
                        str(nb)], capture_output=True, text=True, env=env, cwd=nb.parent,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / nb.name).exists()
    figures = {"walkthrough.ipynb": "walkthrough_mask_sizes.png",
               "streamlining_reduction.ipynb": "streamlining_reduction.png",
               "mask_latency.ipynb": "mask_latency.png",
               "compile_scaling.ipynb": "compile_scaling.png"}
    if nb.name in figures:
        assert (tmp_path / "figures" / figures[nb.name]).exists()
