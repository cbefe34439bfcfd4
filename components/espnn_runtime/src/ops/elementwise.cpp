// STUB: to be implemented.
#include "ops/op_util.h"

namespace espnn {
namespace {
Status NotImplemented(const Model&, const OpInfo&) { return ops::Fail("not implemented in this runtime"); }
Status NoEval(const OpInfo&, const EvalContext&) { return ops::Fail("not implemented"); }
}  // namespace
extern const OpKernel kAddKernel = {NotImplemented, nullptr, NoEval};
extern const OpKernel kMulKernel = {NotImplemented, nullptr, NoEval};
}  // namespace espnn
