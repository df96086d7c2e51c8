#!/usr/bin/python3
"""velox-plot-fit from a checkout: python/velox/plot_fit.py (the wheel's command; its docstring
is the usage). Plotting a catalog without --save-models needs velox's module on the path
(PYTHONPATH=build/python)."""
import os
import runpy
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, "python",
                                "velox"))
runpy.run_module("plot_fit", run_name="__main__")
