"""The quickstart notebook runs headless in a Jupyter kernel: where DataLoader worker
processes hang, the Loader's threads need nothing from the notebook."""

import os

import pytest

NOTEBOOK = os.path.join(os.path.dirname(__file__), "..", "examples", "quickstart.ipynb")


def test_quickstart_notebook_runs_and_reports_metrics():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    text = "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                   for out in cell.get("outputs", []))
    assert "600 PNG files" in text
    assert "600 samples, layout folder" in text
    assert "trained" in text and "over 3 epochs" in text
    accuracy = float(text.split("val accuracy ")[1].split()[0])
    assert accuracy > 0.5  # ten classes: chance is 0.1
