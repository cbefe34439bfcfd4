# Source lists of the test runner cores, shared by the ESP-IDF component
# build (CMakeLists.txt), the host build (host/CMakeLists.txt) and the .pte
# runner's host build (tests/firmware/pte_host), so all compile the same files.
set(ESPNN_TEST_RUNNER_DIR ${CMAKE_CURRENT_LIST_DIR})
# Portable: what both modes share (container header rules, result lines),
# the XTSB bundle parser and runner core, its PAL-backed platform, and the
# XTSP .pte suite parser.
set(ESPNN_TEST_RUNNER_SOURCES
    ${ESPNN_TEST_RUNNER_DIR}/src/container_header.cpp
    ${ESPNN_TEST_RUNNER_DIR}/src/result_line.cpp
    ${ESPNN_TEST_RUNNER_DIR}/src/bundle.cpp
    ${ESPNN_TEST_RUNNER_DIR}/src/bundle_runner.cpp
    ${ESPNN_TEST_RUNNER_DIR}/src/placement.cpp
    ${ESPNN_TEST_RUNNER_DIR}/src/bundle_pal_platform.cpp
    ${ESPNN_TEST_RUNNER_DIR}/src/pte_suite.cpp)
# The .pte suite runner core: ExecuTorch's C++ API, so only builds that
# have ExecuTorch compile it.
set(ESPNN_TEST_RUNNER_PTE_SOURCE ${ESPNN_TEST_RUNNER_DIR}/src/pte_runner.cpp)
set(ESPNN_TEST_RUNNER_INCLUDE ${ESPNN_TEST_RUNNER_DIR}/include)
