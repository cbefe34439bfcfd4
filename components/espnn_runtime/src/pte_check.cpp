// CheckProgram (see pte_check.h): reads only the flatbuffer fields that
// ExecuTorch's loader uses unchecked, with bounds checks of its own.
//
// Flatbuffers wire format (public spec, little-endian): the buffer starts
// with a uint32 offset to the root table. A table starts with an int32
// `soffset`; its vtable lies at table - soffset and holds uint16 vtable
// size, uint16 table size, then one uint16 per field: the field's offset in
// the table, 0 = absent. Reference fields (table, vector, string) hold a
// uint32 offset from the field's own position. A vector is a uint32 length
// followed by its elements (references for tables and strings); a string is
// a uint32 length, the bytes and a NUL.
//
// All arithmetic is done in 64 bits on values below 2^32, so nothing can
// wrap where size_t is 32 bits (ESP32). Loads are byte loads: the program
// may lie at any address.
#include "espnn/pte_check.h"
#include "espnn/byte_reader.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

namespace espnn {
namespace pte {
namespace {

using bytes::LoadU16;
using bytes::LoadU32;
using bytes::LoadU64;

// Field ids, in declaration order of ExecuTorch 1.5.1's schema/program.fbs.
enum ProgramField { kProgExecutionPlan = 1, kProgBackendDelegateData = 3, kProgSegments = 4 };
enum PlanField { kPlanName = 0, kPlanOperators = 6, kPlanDelegates = 7 };
enum OperatorField { kOpName = 0, kOpOverload = 1 };
enum DelegateField { kDelegateId = 0, kDelegateProcessed = 1, kDelegateCompileSpecs = 2 };
enum ReferenceField { kRefLocation = 0, kRefIndex = 1 };
enum CompileSpecField { kSpecKey = 0, kSpecValue = 1 };
enum InlineDataField { kInlineData = 0 };
enum DataSegmentField { kSegmentOffset = 0, kSegmentSize = 1 };
constexpr uint8_t kLocationInline = 0, kLocationSegment = 1;

// The extended header ExecuTorch's serializer writes after the identifier.
constexpr uint32_t kExtHeaderOffset = 8;
constexpr uint32_t kExtHeaderMinLength = 24;  // magic, length, program size, segment base
constexpr uint32_t kMaxFlatbuffer = 0x7FFFFFFFu;  // flatbuffers' own limit (2 GiB - 1)

}  // namespace

bool IsUtf8(const void* data, size_t n) {
  const uint8_t* s = static_cast<const uint8_t*>(data);
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    size_t more;
    uint8_t lo = 0x80, hi = 0xBF;  // range of the first continuation byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      more = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      more = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      more = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (n - i - 1 < more) return false;
    if (s[i + 1] < lo || s[i + 1] > hi) return false;
    for (size_t k = 2; k <= more; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
    i += more + 1;
  }
  return true;
}

namespace {

// A name for a message: at most 32 bytes, anything but printable ASCII as
// '?', so that the message stays one line of ASCII whatever the file holds.
struct Printable {
  char text[40];
  Printable(const uint8_t* s, uint32_t n) {
    uint32_t k = 0;
    for (; k < n && k < 32; ++k) text[k] = (s[k] >= 0x20 && s[k] < 0x7F) ? (char)s[k] : '?';
    if (n > 32) text[k++] = '.', text[k++] = '.', text[k++] = '.';
    text[k] = '\0';
  }
};

struct Table {
  uint32_t pos = 0;       // the table's start (its soffset)
  uint32_t vtable = 0;
  uint32_t vt_fields = 0; // number of field slots in the vtable
  uint32_t size = 0;      // the table's inline size, from the vtable
};

struct Vector {
  uint32_t pos = 0;  // first element
  uint32_t length = 0;
};

// Bounds-checked reading of the flatbuffer at base[0, size).
class Reader {
 public:
  Reader(const uint8_t* base, uint32_t size) : base_(base), size_(size) {}

  bool Fits(uint64_t pos, uint64_t bytes) const { return pos <= size_ && bytes <= size_ - pos; }

  bool ReadTable(uint32_t pos, Table* t) const {
    if (!Fits(pos, 4)) return false;
    const int64_t vtable = (int64_t)pos - (int64_t)(int32_t)LoadU32(base_ + pos);
    if (vtable < 0 || !Fits((uint64_t)vtable, 4)) return false;
    const uint32_t vt_size = LoadU16(base_ + vtable);
    const uint32_t table_size = LoadU16(base_ + vtable + 2);
    if (vt_size < 4 || vt_size % 2 != 0 || !Fits((uint64_t)vtable, vt_size) || table_size < 4 ||
        !Fits(pos, table_size))
      return false;
    t->pos = pos;
    t->vtable = (uint32_t)vtable;
    t->vt_fields = (vt_size - 4) / 2;
    t->size = table_size;
    return true;
  }

  // Position of field `id` of `t` holding `bytes` bytes; 0 = absent. A
  // field that would reach past its table is reported as `*bad`.
  uint32_t Field(const Table& t, uint32_t id, uint32_t bytes, bool* bad) const {
    if (id >= t.vt_fields) return 0;
    const uint32_t off = LoadU16(base_ + t.vtable + 4 + 2 * id);
    if (off == 0) return 0;
    if (off < 4 || (uint64_t)off + bytes > t.size) {
      *bad = true;
      return 0;
    }
    return t.pos + off;
  }

  // Follows the uint32 reference stored at `pos`.
  bool Follow(uint32_t pos, uint32_t* target) const {
    if (!Fits(pos, 4)) return false;
    const uint64_t to = (uint64_t)pos + LoadU32(base_ + pos);
    if (to >= size_) return false;
    *target = (uint32_t)to;
    return true;
  }

  bool ReadVector(uint32_t pos, uint32_t element_bytes, Vector* v) const {
    if (!Fits(pos, 4)) return false;
    v->length = LoadU32(base_ + pos);
    v->pos = pos + 4;
    return Fits(v->pos, (uint64_t)v->length * element_bytes);
  }

  bool ReadString(uint32_t pos, const uint8_t** s, uint32_t* n) const {
    if (!Fits(pos, 4)) return false;
    *n = LoadU32(base_ + pos);
    if (!Fits((uint64_t)pos + 4, (uint64_t)*n + 1) || base_[(uint64_t)pos + 4 + *n] != 0) return false;
    *s = base_ + pos + 4;
    return true;
  }

  uint8_t U8(uint32_t pos) const { return base_[pos]; }
  uint32_t U32(uint32_t pos) const { return LoadU32(base_ + pos); }
  uint64_t U64(uint32_t pos) const { return LoadU64(base_ + pos); }

 private:
  const uint8_t* base_;
  uint32_t size_;
};

Status Invalid(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// What a reference field of a table resolves to.
enum class Ref { kAbsent, kBad, kOk };

// Reference field `id` of `t` -> the position it points at.
Ref RefField(const Reader& r, const Table& t, uint32_t id, uint32_t* target) {
  bool bad = false;
  const uint32_t at = r.Field(t, id, 4, &bad);
  if (bad) return Ref::kBad;
  if (at == 0) return Ref::kAbsent;
  return r.Follow(at, target) ? Ref::kOk : Ref::kBad;
}

Ref TableField(const Reader& r, const Table& t, uint32_t id, Table* out) {
  uint32_t at;
  const Ref ref = RefField(r, t, id, &at);
  if (ref != Ref::kOk) return ref;
  return r.ReadTable(at, out) ? Ref::kOk : Ref::kBad;
}

Ref VectorField(const Reader& r, const Table& t, uint32_t id, uint32_t element_bytes, Vector* out) {
  uint32_t at;
  const Ref ref = RefField(r, t, id, &at);
  if (ref != Ref::kOk) return ref;
  return r.ReadVector(at, element_bytes, out) ? Ref::kOk : Ref::kBad;
}

Ref StringField(const Reader& r, const Table& t, uint32_t id, const uint8_t** s, uint32_t* n) {
  uint32_t at;
  const Ref ref = RefField(r, t, id, &at);
  if (ref != Ref::kOk) return ref;
  return r.ReadString(at, s, n) ? Ref::kOk : Ref::kBad;
}

// Element `i` of a vector of tables.
bool TableAt(const Reader& r, const Vector& v, uint32_t i, Table* out) {
  uint32_t at;
  return r.Follow(v.pos + 4 * i, &at) && r.ReadTable(at, out);
}

// A string field that must be there (required) or may be absent, and must
// be printable ASCII when present (see pte_check.h for why not any UTF-8).
// `what` names it in the message.
Status CheckString(const Reader& r, const Table& t, uint32_t id, bool required, const char* where,
                   const char* what) {
  const uint8_t* s = nullptr;
  uint32_t n = 0;
  switch (StringField(r, t, id, &s, &n)) {
    case Ref::kAbsent:
      return required ? Invalid("%s: no %s", where, what) : Status::Ok();
    case Ref::kBad:
      return Invalid("%s: the %s lies outside the program", where, what);
    case Ref::kOk:
      break;
  }
  for (uint32_t i = 0; i < n; ++i)
    if (s[i] < 0x20 || s[i] > 0x7E)
      return Invalid("%s: the %s '%s' has a byte 0x%02x that is not printable ASCII", where, what,
                     Printable(s, n).text, s[i]);
  return Status::Ok();
}

struct ProgramLists {
  Ref inline_data_ref = Ref::kAbsent;
  Vector inline_data;  // Program.backend_delegate_data
  Ref segments_ref = Ref::kAbsent;
  Vector segments;     // Program.segments (references to DataSegment tables)
};

Status CheckProcessed(const Reader& r, const Table& ref, const ProgramLists& lists, const char* where) {
  bool bad = false;
  const uint32_t loc_at = r.Field(ref, kRefLocation, 1, &bad);
  const uint32_t idx_at = r.Field(ref, kRefIndex, 4, &bad);
  if (bad) return Invalid("%s: the processed-data reference is corrupt", where);
  const uint8_t location = loc_at ? r.U8(loc_at) : kLocationInline;  // schema defaults
  const uint32_t index = idx_at ? r.U32(idx_at) : 0;
  if (location == kLocationInline) {
    if (lists.inline_data_ref != Ref::kOk)
      return Invalid("%s: inline data %u referenced, but the program has %s", where, (unsigned)index,
                     lists.inline_data_ref == Ref::kAbsent ? "no inline delegate data" : "a corrupt inline data list");
    if (index >= lists.inline_data.length)
      return Invalid("%s: inline data %u referenced, the program has %u", where, (unsigned)index,
                     (unsigned)lists.inline_data.length);
    Table entry;
    Vector data;
    if (!TableAt(r, lists.inline_data, index, &entry))
      return Invalid("%s: inline data %u is corrupt", where, (unsigned)index);
    const Ref d = VectorField(r, entry, kInlineData, 1, &data);
    if (d != Ref::kOk)
      return Invalid("%s: inline data %u has %s", where, (unsigned)index,
                     d == Ref::kAbsent ? "no bytes" : "bytes outside the program");
    return Status::Ok();
  }
  if (location == kLocationSegment) {
    if (lists.segments_ref != Ref::kOk)
      return Invalid("%s: segment %u referenced, but the program has %s", where, (unsigned)index,
                     lists.segments_ref == Ref::kAbsent ? "no segment list" : "a corrupt segment list");
    if (index >= lists.segments.length)
      return Invalid("%s: segment %u referenced, the program has %u", where, (unsigned)index,
                     (unsigned)lists.segments.length);
    return Status::Ok();
  }
  return Invalid("%s: data location %u is neither INLINE (0) nor SEGMENT (1)", where, (unsigned)location);
}

Status CheckDelegate(const Reader& r, const Table& d, const ProgramLists& lists, const char* where) {
  ESPNN_RETURN_IF_ERROR(CheckString(r, d, kDelegateId, /*required=*/true, where, "backend id"));
  Table ref;
  switch (TableField(r, d, kDelegateProcessed, &ref)) {
    case Ref::kAbsent: return Invalid("%s: no processed-data reference (the delegate's payload)", where);
    case Ref::kBad: return Invalid("%s: the processed-data reference lies outside the program", where);
    case Ref::kOk: break;
  }
  ESPNN_RETURN_IF_ERROR(CheckProcessed(r, ref, lists, where));
  // No compile-spec list is fine (ExecuTorch 1.5.1 checks for it); each
  // entry's key and value it reads unchecked.
  Vector specs;
  const Ref specs_ref = VectorField(r, d, kDelegateCompileSpecs, 4, &specs);
  if (specs_ref == Ref::kBad) return Invalid("%s: the compile-spec list lies outside the program", where);
  for (uint32_t k = 0; specs_ref == Ref::kOk && k < specs.length; ++k) {
    char spec_where[160];
    snprintf(spec_where, sizeof(spec_where), "%s compile spec %u", where, (unsigned)k);
    Table spec;
    if (!TableAt(r, specs, k, &spec)) return Invalid("%s: corrupt", spec_where);
    ESPNN_RETURN_IF_ERROR(CheckString(r, spec, kSpecKey, /*required=*/true, spec_where, "key"));
    Vector value;
    const Ref v = VectorField(r, spec, kSpecValue, 1, &value);
    if (v != Ref::kOk)
      return Invalid("%s: %s", spec_where, v == Ref::kAbsent ? "no value" : "the value lies outside the program");
  }
  return Status::Ok();
}

Status CheckMethod(const Reader& r, const Table& plan, uint32_t index, const ProgramLists& lists) {
  char where[96];
  snprintf(where, sizeof(where), "method %u", (unsigned)index);
  ESPNN_RETURN_IF_ERROR(CheckString(r, plan, kPlanName, /*required=*/true, where, "name"));
  const uint8_t* name = nullptr;
  uint32_t name_len = 0;  // (set by StringField: the name was checked just above)
  (void)StringField(r, plan, kPlanName, &name, &name_len);
  snprintf(where, sizeof(where), "method %u ('%s')", (unsigned)index, Printable(name, name_len).text);

  Vector ops;
  const Ref ops_ref = VectorField(r, plan, kPlanOperators, 4, &ops);
  if (ops_ref == Ref::kBad) return Invalid("%s: the operator list lies outside the program", where);
  for (uint32_t k = 0; ops_ref == Ref::kOk && k < ops.length; ++k) {
    char op_where[128];
    snprintf(op_where, sizeof(op_where), "%s operator %u", where, (unsigned)k);
    Table op;
    if (!TableAt(r, ops, k, &op)) return Invalid("%s: corrupt", op_where);
    ESPNN_RETURN_IF_ERROR(CheckString(r, op, kOpName, /*required=*/false, op_where, "name"));
    ESPNN_RETURN_IF_ERROR(CheckString(r, op, kOpOverload, /*required=*/false, op_where, "overload"));
  }

  Vector delegates;
  const Ref del_ref = VectorField(r, plan, kPlanDelegates, 4, &delegates);
  if (del_ref == Ref::kBad) return Invalid("%s: the delegate list lies outside the program", where);
  for (uint32_t k = 0; del_ref == Ref::kOk && k < delegates.length; ++k) {
    char d_where[128];
    snprintf(d_where, sizeof(d_where), "%s delegate %u", where, (unsigned)k);
    Table d;
    if (!TableAt(r, delegates, k, &d)) return Invalid("%s: corrupt", d_where);
    ESPNN_RETURN_IF_ERROR(CheckDelegate(r, d, lists, d_where));
  }
  return Status::Ok();
}

// Every data segment (constants, delegate payloads) lies inside the file:
// segment_base_offset (extended header) + offset + size <= the file size.
// ExecuTorch's loader finds a truncated file only when it reads a segment
// ("File size is too small"), as a load error; this names it up front.
Status CheckSegments(const Reader& r, const ProgramLists& lists, uint64_t segment_base, size_t file_size) {
  if (lists.segments_ref != Ref::kOk) return Status::Ok();  // no segments: nothing outside the flatbuffer
  for (uint32_t i = 0; i < lists.segments.length; ++i) {
    Table seg;
    if (!TableAt(r, lists.segments, i, &seg)) return Invalid("data segment %u: corrupt", (unsigned)i);
    bool bad = false;
    const uint32_t off_at = r.Field(seg, kSegmentOffset, 8, &bad);
    const uint32_t size_at = r.Field(seg, kSegmentSize, 8, &bad);
    if (bad) return Invalid("data segment %u: corrupt", (unsigned)i);
    const uint64_t offset = off_at ? r.U64(off_at) : 0, bytes = size_at ? r.U64(size_at) : 0;
    // Overflow-safe: each term is compared before it is added.
    if (segment_base > file_size || offset > file_size - segment_base ||
        bytes > file_size - segment_base - offset)
      return Invalid("data segment %u ([%llu, +%llu) after the segment base %llu) lies past the end of the "
                     "%lu-byte file: the file is truncated", (unsigned)i, (unsigned long long)offset,
                     (unsigned long long)bytes, (unsigned long long)segment_base, (unsigned long)file_size);
  }
  return Status::Ok();
}

// The flatbuffer's extent: the whole file, or the program size of the
// extended header ("eh00") when there is one (segments follow it).
Status FlatbufferSize(const uint8_t* p, size_t size, uint32_t* out) {
  uint64_t fb = size;
  if (size >= kExtHeaderOffset + 8 && memcmp(p + kExtHeaderOffset, "eh00", 4) == 0) {
    const uint32_t length = LoadU32(p + kExtHeaderOffset + 4);
    if (length < kExtHeaderMinLength || (uint64_t)kExtHeaderOffset + length > size)
      return Invalid("the extended header claims %u bytes (at least %u, within the %lu-byte file)",
                     (unsigned)length, (unsigned)kExtHeaderMinLength, (unsigned long)size);
    fb = LoadU64(p + kExtHeaderOffset + 8);
    if (fb > size)
      return Invalid("the extended header gives a program size of %llu bytes, the file has %lu",
                     (unsigned long long)fb, (unsigned long)size);
  }
  if (fb > kMaxFlatbuffer)
    return Invalid("a program of %llu bytes is larger than a flatbuffer can be", (unsigned long long)fb);
  if (fb < kExtHeaderOffset) return Invalid("a program of %llu bytes is too short", (unsigned long long)fb);
  *out = (uint32_t)fb;
  return Status::Ok();
}

Status Invalid(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Status s = Status::ErrorV(StatusCode::kInvalidBlob, fmt, ap);
  va_end(ap);
  return s;
}

}  // namespace

Status CheckProgram(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (p == nullptr || size < kExtHeaderOffset)
    return Invalid("%lu bytes: too short for an ExecuTorch program", (unsigned long)size);
  if (memcmp(p + 4, "ET12", 4) != 0)
    return Invalid("not an ExecuTorch 1.x program: the file identifier (bytes 4-7: %02x %02x %02x %02x) is "
                   "not 'ET12'", p[4], p[5], p[6], p[7]);
  uint32_t fb_size = 0;
  ESPNN_RETURN_IF_ERROR(FlatbufferSize(p, size, &fb_size));
  const Reader r(p, fb_size);

  Table program;
  uint32_t root;
  if (!r.Follow(0, &root) || !r.ReadTable(root, &program)) return Invalid("the root table is corrupt");
  ProgramLists lists;
  lists.inline_data_ref = VectorField(r, program, kProgBackendDelegateData, 4, &lists.inline_data);
  lists.segments_ref = VectorField(r, program, kProgSegments, 4, &lists.segments);

  // Segments exist only behind an extended header (its segment base); without
  // one the flatbuffer is the whole file.
  if (size >= kExtHeaderOffset + 8 && memcmp(p + kExtHeaderOffset, "eh00", 4) == 0)
    ESPNN_RETURN_IF_ERROR(CheckSegments(r, lists, LoadU64(p + kExtHeaderOffset + 16), size));

  Vector plans;
  switch (VectorField(r, program, kProgExecutionPlan, 4, &plans)) {
    case Ref::kAbsent: return Invalid("no method list (execution_plan)");
    case Ref::kBad: return Invalid("the method list (execution_plan) lies outside the program");
    case Ref::kOk: break;
  }
  for (uint32_t i = 0; i < plans.length; ++i) {
    Table plan;
    if (!TableAt(r, plans, i, &plan)) return Invalid("method %u: corrupt", (unsigned)i);
    ESPNN_RETURN_IF_ERROR(CheckMethod(r, plan, i, lists));
  }
  return Status::Ok();
}

}  // namespace pte
}  // namespace espnn
