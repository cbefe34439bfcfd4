// STUB: to be implemented.
#include "ops/op_util.h"

namespace espnn {
namespace {
Status NotImplemented(const Model&, const OpInfo&) { return ops::Fail("not implemented in this runtime"); }
Status NoEval(const OpInfo&, const EvalContext&) { return ops::Fail("not implemented"); }
}  // namespace
extern const OpKernel kReshapeKernel = {NotImplemented, nullptr, NoEval};
extern const OpKernel kTransposeKernel = {NotImplemented, nullptr, NoEval};
extern const OpKernel kSliceKernel = {NotImplemented, nullptr, NoEval};
extern const OpKernel kPadKernel = {NotImplemented, nullptr, NoEval};
extern const OpKernel kConcatKernel = {NotImplemented, nullptr, NoEval};
extern const OpKernel kSplitKernel = {NotImplemented, nullptr, NoEval};
}  // namespace espnn
