// The test rig's container formats, XTSB bundles (espnn/bundle.h) and XTSP
// .pte suites (espnn/pte_suite.h), as the device parsers define them: the
// Python writers and readers (executorch_espnn.bundle, .pte_suite) take
// every magic, size, field offset and limit from here.
#include <pybind11/pybind11.h>

#include "constant_dict.h"
#include "espnn/bundle.h"
#include "espnn/pte_suite.h"

namespace py = pybind11;

namespace {

py::dict BundleFormat() {
  using namespace espnn::bundle;
  py::dict d = ConstantDict({{"MAGIC", kMagic}, {"VERSION", kVersion}, {"HEADER_SIZE", kHeaderSize},
                     {"CASE_RECORD_SIZE", kCaseRecordSize}, {"PAYLOAD_ALIGNMENT", kPayloadAlignment},
                     {"MAX_CASES", kMaxCases}, {"MAX_NAME_BYTES", kMaxNameBytes}, {"MAX_RUNS", kMaxRuns}});
  d["HEADER_FIELDS"] = ConstantDict({{"magic", kHdrMagic}, {"version", kHdrVersion}, {"header_size", kHdrHeaderSize},
                             {"bundle_size", kHdrBundleSize}, {"flags", kHdrFlags},
                             {"case_count", kHdrCaseCount}, {"case_table", kHdrCaseTable},
                             {"crc32", kHdrCrc32}, {"reserved", kHdrReserved}});
  d["CASE_FIELDS"] = ConstantDict({{"name_offset", kCaseNameOffset}, {"name_size", kCaseNameSize},
                           {"model_offset", kCaseModelOffset}, {"model_size", kCaseModelSize},
                           {"inputs_offset", kCaseInputsOffset}, {"inputs_size", kCaseInputsSize},
                           {"expected_offset", kCaseExpectedOffset}, {"expected_size", kCaseExpectedSize},
                           {"runs", kCaseRuns}, {"flags", kCaseFlags}, {"reserved0", kCaseReserved0},
                           {"reserved1", kCaseReserved1}});
  return d;
}

py::dict SuiteFormat() {
  using namespace espnn::pte;
  py::dict d = ConstantDict({{"MAGIC", kMagic}, {"VERSION", kVersion}, {"HEADER_SIZE", kHeaderSize},
                     {"CASE_RECORD_SIZE", kCaseRecordSize}, {"TENSOR_RECORD_SIZE", kTensorRecordSize},
                     {"PTE_ALIGNMENT", kPteAlignment}, {"DATA_ALIGNMENT", kDataAlignment},
                     {"MAX_CASES", kMaxCases}, {"MAX_NAME_BYTES", kMaxNameBytes},
                     {"MAX_METHOD_BYTES", kMaxMethodBytes}, {"MAX_TENSORS", kMaxTensors},
                     {"MAX_RANK", kMaxRank}, {"MAX_RUNS", kMaxRuns}});
  d["HEADER_FIELDS"] = ConstantDict({{"magic", kHdrMagic}, {"version", kHdrVersion}, {"header_size", kHdrHeaderSize},
                             {"suite_size", kHdrSuiteSize}, {"flags", kHdrFlags},
                             {"pte_offset", kHdrPteOffset}, {"pte_size", kHdrPteSize},
                             {"method_offset", kHdrMethodOffset}, {"method_size", kHdrMethodSize},
                             {"case_count", kHdrCaseCount}, {"case_table", kHdrCaseTable},
                             {"crc32", kHdrCrc32}, {"reserved", kHdrReserved}});
  d["CASE_FIELDS"] = ConstantDict({{"name_offset", kCaseNameOffset}, {"name_size", kCaseNameSize},
                           {"inputs_table", kCaseInputsTable}, {"input_count", kCaseInputCount},
                           {"outputs_table", kCaseOutputsTable}, {"output_count", kCaseOutputCount},
                           {"runs", kCaseRuns}, {"flags", kCaseFlags}});
  d["TENSOR_FIELDS"] = ConstantDict({{"dtype", kTensorDtype}, {"rank", kTensorRank},
                             {"data_offset", kTensorDataOffset}, {"data_size", kTensorDataSize},
                             {"atol", kTensorAtol}, {"flags", kTensorFlags},
                             {"reserved0", kTensorReserved0}, {"reserved1", kTensorReserved1},
                             {"dims", kTensorDims}});
  d["CASE_FLAGS"] = ConstantDict({{"EXPECT_INVALID_ARGUMENT", kCaseFlagExpectInvalidArgument}});
  // The dtypes a suite may carry: numpy-style name -> (ExecuTorch
  // ScalarType code, element bytes), as the device parser accepts them.
  py::dict dtypes;
  for (uint32_t code = 0; code < 64; ++code)
    if (DtypeSize(code) != 0) dtypes[DtypeName(code)] = py::make_tuple(code, DtypeSize(code));
  d["DTYPES"] = dtypes;
  return d;
}

}  // namespace

void bind_container_constants(py::module_& m) {
  m.attr("BUNDLE_FORMAT") = BundleFormat();
  m.attr("PTE_SUITE_FORMAT") = SuiteFormat();
}
