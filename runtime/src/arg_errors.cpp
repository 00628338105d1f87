// The ArgPacker's error messages: built only when a launch is wrong, so the
// hot path never formats a string.
#include <cstdio>

#include "kiln/error.h"
#include "kiln/runtime/arg_packer.h"

namespace kiln::rt {
namespace {

std::string hexAddress(uint64_t a) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(a));
  return buf;
}

}  // namespace

std::string ScalarArg::toString() const {
  switch (kind) {
    case Kind::Float: {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.17g", f);
      return std::string("float ") + buf;
    }
    case Kind::Int: return "integer " + std::to_string(i);
    case Kind::Bool: return i ? "bool true" : "bool false";
  }
  return "?";
}

void ArgPacker::fail(const std::string& message) const {
  throw Error("kiln: launch of kernel '" + sig_.kernel + "': " + message);
}

void ArgPacker::failCount(const char* what, size_t expected, size_t got) const {
  std::string msg = "expected " + std::to_string(expected) + " " + what;
  std::string names;
  auto add = [&](const std::string& n) { names += (names.empty() ? "" : ", ") + n; };
  const std::string kind = what;
  if (kind == "tensors")
    for (const TensorParam& t : sig_.tensors) add(t.name);
  else if (kind == "scalars")
    for (const ScalarParam& s : sig_.scalars) add(s.name);
  else
    for (const DimParam& d : sig_.dims) add(d.name);
  if (!names.empty()) msg += " (" + names + ")";
  msg += ", got " + std::to_string(got);
  if (got < expected) {
    msg += ": missing ";
    if (kind == "tensors")
      msg += sig_.describeTensor(got);
    else if (kind == "scalars")
      msg += "scalar '" + sig_.scalars[got].name + "'";
    else
      msg += "dim '" + sig_.dims[got].name + "' (pass none to infer them all)";
  } else {
    msg += ": " + std::to_string(got - expected) + " more than the kernel takes";
  }
  fail(msg);
}

void ArgPacker::failTensor(size_t t, const std::string& problem) const {
  fail(sig_.describeTensor(t) + ": " + problem);
}

void ArgPacker::failDim(size_t t, size_t axis, const TensorView& v, int64_t bound,
                        int boundSource, const TensorView* const* tensors) const {
  const int32_t d = axes_[rules_[t].firstAxis + axis].dim;
  const std::string& name = sig_.dims[d].name;
  std::string source;
  if (boundSource < 0) {
    source = "was given";
  } else {
    source = "from " + sig_.describeTensor(static_cast<size_t>(boundSource)) + " of shape " +
             formatShape(tensors[boundSource]->shape);
  }
  failTensor(t, "axis " + std::to_string(axis) + " is dynamic dim '" + name + "' = " +
                    std::to_string(v.shape[axis]) + " (shape " + formatShape(v.shape) +
                    "), but " + name + " = " + std::to_string(bound) + " " + source);
}

void ArgPacker::failScalar(size_t s, const ScalarArg& v, const std::string& problem) const {
  const ScalarParam& p = sig_.scalars[s];
  fail("scalar '" + p.name + "' (" + std::string(dtypeName(p.dtype)) + "): " + problem +
       ", got " + v.toString());
}

void ArgPacker::failAlias(size_t a, size_t b, const TensorView& va, const TensorView& vb) const {
  auto range = [](const TensorView& v) {
    uint64_t lo = reinterpret_cast<uintptr_t>(v.data);
    for (size_t i = 0; i < v.shape.size(); ++i)
      if (v.stride(i) < 0)
        lo -= uint64_t(-v.stride(i)) * uint64_t(v.shape[i] - 1) * uint64_t(dtypeSize(v.dtype));
    return "[" + hexAddress(lo) + ", " + hexAddress(lo + v.spanBytes()) + ")";
  };
  fail(sig_.describeTensor(a) + " overlaps " + sig_.describeTensor(b) + " in memory: " +
       range(va) + " and " + range(vb) +
       "; kernel pointers are no-alias, so an output may not share memory with an input or "
       "another output");
}

}  // namespace kiln::rt
