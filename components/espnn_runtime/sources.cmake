# Source list of the runtime, shared by the ESP-IDF component build and the
# host build (host/CMakeLists.txt) so both compile exactly the same files.
set(ESPNN_RUNTIME_DIR ${CMAKE_CURRENT_LIST_DIR})
# CONFIGURE_DEPENDS (re-glob when an op file is added) is refused in CMake's
# script mode, and ESP-IDF's requirement expansion includes every component's
# CMakeLists.txt with `cmake -P` (tools/cmake/scripts/component_get_requirements.cmake).
if(CMAKE_SCRIPT_MODE_FILE)
  file(GLOB ESPNN_RUNTIME_OP_SOURCES ${ESPNN_RUNTIME_DIR}/src/ops/*.cpp)
else()
  file(GLOB ESPNN_RUNTIME_OP_SOURCES CONFIGURE_DEPENDS ${ESPNN_RUNTIME_DIR}/src/ops/*.cpp)
endif()
set(ESPNN_RUNTIME_SOURCES
    ${ESPNN_RUNTIME_DIR}/src/status.cpp
    ${ESPNN_RUNTIME_DIR}/src/parser.cpp
    ${ESPNN_RUNTIME_DIR}/src/interpreter.cpp
    ${ESPNN_RUNTIME_DIR}/src/single_op.cpp
    ${ESPNN_RUNTIME_OP_SOURCES})
set(ESPNN_RUNTIME_PUBLIC_INCLUDE ${ESPNN_RUNTIME_DIR}/include)
set(ESPNN_RUNTIME_PRIVATE_INCLUDE ${ESPNN_RUNTIME_DIR}/src)

# espnn_select_ops(TARGET OPS): TARGET's op registry references only the
# kernels of OPS (a CMake list of XTS3 op names, see xts3_format.h; only
# src/ops/op_registry.cpp reads the definition). The registry refuses the
# build if a name is not an op.
function(espnn_select_ops target ops)
  string(REPLACE ";" "," _joined "${ops}")
  target_compile_definitions(${target} PRIVATE "ESPNN_OPS=\"${_joined}\"")
endfunction()
