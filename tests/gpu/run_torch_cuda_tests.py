"""Runs the PyTorch backend's CUDA tests (tests/torch/test_cuda.py) for scripts/gpu-check.sh, with
or without pytest: the lent GPU machine has torch but maybe no pytest, and cannot install it.

    PYTHONPATH=<module build>/python python3 tests/gpu/run_torch_cuda_tests.py

Each test_* function of test_cuda.py runs in file order (tmp_path given a fresh folder). A test
that would be skipped counts as a failure here: the GPU check must run all of them. Without
pytest, a stand-in provides the three things test_cuda.py uses (mark.skipif, raises, and the
marks' shape pytest gives). Prints one line per test and a last line "torch CUDA tests: P of N
passed"; exit 0 only if every test ran and passed.
"""
import inspect
import os
import re
import sys
import tempfile
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))  # test_cuda, harness, rank_cases (as conftest.py does)


def _pytest_stand_in():
    class Mark:
        def __init__(self, name, args, kwargs):
            self.name, self.args, self.kwargs = name, args, kwargs

    class MarkGenerator:
        def skipif(self, condition, reason=""):
            def apply(fn):
                fn.pytestmark = getattr(fn, "pytestmark", []) + [Mark("skipif", (condition,), {"reason": reason})]
                return fn
            return apply

    class raises:  # noqa: N801 - pytest's name
        def __init__(self, expected, match=None):
            self.expected, self.match = expected, match

        def __enter__(self):
            return self

        def __exit__(self, kind, value, tb):
            if kind is None:
                raise AssertionError(f"DID NOT RAISE {self.expected}")
            if not issubclass(kind, self.expected):
                return False
            if self.match is not None and not re.search(self.match, str(value)):
                raise AssertionError(f"{self.match!r} not found in {value!s}")
            return True

    module = types.ModuleType("pytest")
    module.mark = MarkGenerator()
    module.raises = raises
    return module


try:
    import pytest  # noqa: F401
    runner = "pytest's marks"
except ImportError:
    sys.modules["pytest"] = _pytest_stand_in()
    runner = "a pytest stand-in (no pytest here)"

import test_cuda  # noqa: E402


def main() -> int:
    tests = [(n, f) for n, f in vars(test_cuda).items() if n.startswith("test_") and callable(f)]
    tests.sort(key=lambda item: inspect.getsourcelines(item[1])[1])
    print(f"torch CUDA tests ({runner}): torch {__import__('torch').__version__}, "
          f"{__import__('torch').cuda.device_count()} GPU(s)", flush=True)
    passed = 0
    for name, fn in tests:
        skip = [m.kwargs.get("reason", "") for m in getattr(fn, "pytestmark", [])
                if m.name == "skipif" and m.args and m.args[0]]
        if skip:
            print(f"  {name}: SKIPPED ({'; '.join(skip)}) - counts as a failure here", flush=True)
            continue
        start = time.monotonic()
        try:
            with tempfile.TemporaryDirectory(prefix="stragglar-gpu-check-") as tmp:
                kwargs = {"tmp_path": __import__("pathlib").Path(tmp)} if "tmp_path" in inspect.signature(fn).parameters else {}
                fn(**kwargs)
        except BaseException:  # noqa: BLE001 - reported, the next test still runs
            print(f"  {name}: FAILED ({time.monotonic() - start:.1f} s)\n{traceback.format_exc()}", flush=True)
            continue
        passed += 1
        print(f"  {name}: passed ({time.monotonic() - start:.1f} s)", flush=True)
    print(f"torch CUDA tests: {passed} of {len(tests)} passed")
    return 0 if passed == len(tests) and tests else 1


if __name__ == "__main__":
    sys.exit(main())
