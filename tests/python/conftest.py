"""Test setup: make ``qdeploy`` (python/) and the test helpers importable, keep the tree free of bytecode, and keep
torch to the two cores CI has."""

import sys
from pathlib import Path

import pytest

sys.dont_write_bytecode = True
ROOT = Path(__file__).resolve().parents[2]
# BUILD/python holds the native module (qdeploy._native) of a CMake build; QDEPLOY_BUILD_DIR names another build.
import os  # noqa: E402

BUILD = Path(os.environ.get("QDEPLOY_BUILD_DIR", ROOT / "build"))
for p in (BUILD / "python", ROOT / "python", Path(__file__).resolve().parent):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import torch  # noqa: E402

torch.set_num_threads(2)


@pytest.fixture
def synth_data(tmp_path):
    """Eight 128x128 images with COCO annotations (categories 1..10)."""
    import synth

    pytest.importorskip("PIL")
    return synth.write_dataset(tmp_path / "data", n_images=8, size=128)
