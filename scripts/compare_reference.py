#!/usr/bin/python3
"""velox-compare-reference from a checkout: python/velox/compare_reference.py (the wheel's command;
its docstring is the usage). Needs numpy and h5py, not a build."""
import os
import runpy
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, "python",
                                "velox"))
runpy.run_module("compare_reference", run_name="__main__")
