// A dict of named format constants for the binding (every one fits uint32;
// Python sees plain ints). Shared by module.cpp (XTS3) and
// container_constants.cpp (XTSB bundles, XTSP suites).
#pragma once

#include <pybind11/pybind11.h>

#include <initializer_list>
#include <stdint.h>

struct NamedConstant {
  const char* name;
  uint32_t value;
};

inline pybind11::dict ConstantDict(std::initializer_list<NamedConstant> constants) {
  pybind11::dict d;
  for (const NamedConstant& c : constants) d[c.name] = c.value;
  return d;
}
