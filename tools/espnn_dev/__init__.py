"""What the tests share with the benchmarks, the fuzz-corpus scripts and the
device-evidence tool: XTS3 graphs and blobs (op_corpus, xts3_mutations,
band_graphs, graph_util, dispatch_cases, regression_blobs), ExecuTorch
programs (et_programs, pte_models) and the firmware builds (xtensa_build,
idf_project). Not shipped in the wheel and not a test: code outside tests/
imports from here, never from tests/ (tests/test_import_graph.py).
pyproject's pythonpath puts tools/ on the tests' path; a script adds it with
``sys.path.insert(0, str(REPO / "tools"))``."""
