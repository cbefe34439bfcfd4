"""Helpers only the tests use (TFLite's integer formulas, the int8 layer
reference, the tool-chain probe); no tests here. Tests import them as
``from support import tflite_reference`` (pyproject: pythonpath = ["tests", ...]).
What tools outside tests/ need too lives in tools/espnn_dev."""
