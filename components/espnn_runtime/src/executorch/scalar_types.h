// XTS3 dtypes as ExecuTorch scalar types, for the delegate glue and the
// operator-library kernels.
#pragma once

#include <executorch/runtime/core/exec_aten/exec_aten.h>

#include "espnn/xts3_format.h"

namespace espnn {
namespace et {

inline executorch::aten::ScalarType ToScalarType(xts3::DType d) {
  switch (d) {
    case xts3::DType::INT8: return executorch::aten::ScalarType::Char;
    case xts3::DType::INT32: return executorch::aten::ScalarType::Int;
    case xts3::DType::FLOAT32: return executorch::aten::ScalarType::Float;
  }
  return executorch::aten::ScalarType::Undefined;
}

// The XTS3 dtype of a scalar type; false when XTS3 has none.
inline bool FromScalarType(executorch::aten::ScalarType t, xts3::DType* out) {
  for (xts3::DType d : {xts3::DType::INT8, xts3::DType::INT32, xts3::DType::FLOAT32})
    if (ToScalarType(d) == t) {
      *out = d;
      return true;
    }
  return false;
}

}  // namespace et
}  // namespace espnn
