"""pytest setup for the PyTorch backend tests (tests/torch; CTest label `torch`).

The package under test is the one on PYTHONPATH: CTest points it at <build>/python (the module
built by this build beside a copy of python/stragglar); after `pip install .` plain `pytest
tests/torch` tests the installed one. This directory is on sys.path, also in the ranks' processes
(spawn passes sys.path on), so they import `rank_cases` and `harness` by name.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import stragglar.torch  # noqa: F401
except ImportError as e:  # a clear failure, not a skip: CTest registers these tests only when built
    raise ImportError(f"stragglar.torch cannot be imported ({e}); build the target stragglar_torch and put "
                      f"<build>/python on PYTHONPATH, or `python3 -m pip install --no-build-isolation .`") from e
