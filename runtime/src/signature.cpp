// KernelSignature queries, validation and text form.
#include "kiln/runtime/signature.h"

#include <set>

#include "kiln/error.h"

namespace kiln::rt {
namespace {

template <class List>
int findByName(const List& list, std::string_view name) {
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].name == name) return static_cast<int>(i);
  return -1;
}

bool isPowerOfTwo(unsigned v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

size_t KernelSignature::numInputs() const { return tensors.size() - numOutputs(); }

size_t KernelSignature::numOutputs() const {
  size_t n = 0;
  for (const TensorParam& t : tensors) n += t.isOutput ? 1 : 0;
  return n;
}

size_t KernelSignature::numParams() const { return parameterSizes().size(); }

std::vector<size_t> KernelSignature::parameterSizes() const {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < tensors.size(); ++i) sizes.push_back(sizeof(void*));
  for (size_t i = 0; i < dims.size(); ++i) sizes.push_back(sizeof(int64_t));
  for (const TensorParam& t : tensors)
    if (t.passStrides)
      for (size_t a = 0; a < t.shape.size(); ++a) sizes.push_back(sizeof(int64_t));
  for (const ScalarParam& s : scalars) sizes.push_back(static_cast<size_t>(dtypeSize(s.dtype)));
  return sizes;
}

int KernelSignature::findTensor(std::string_view name) const { return findByName(tensors, name); }
int KernelSignature::findDim(std::string_view name) const { return findByName(dims, name); }
int KernelSignature::findScalar(std::string_view name) const { return findByName(scalars, name); }

void KernelSignature::validate() const {
  auto fail = [&](const std::string& what) {
    throw Error("kiln: invalid signature for kernel '" + kernel + "': " + what);
  };
  std::set<std::string, std::less<>> names;
  auto claim = [&](const std::string& name, const char* kind) {
    if (name.empty()) fail(std::string("a ") + kind + " has an empty name");
    if (!names.insert(name).second) fail("the name '" + name + "' is used twice");
  };
  for (const DimParam& d : dims) claim(d.name, "dynamic dim");
  bool sawOutput = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorParam& t = tensors[i];
    claim(t.name, "tensor");
    if (t.isOutput) sawOutput = true;
    else if (sawOutput)
      fail("input tensor '" + t.name + "' comes after an output; inputs must come first");
    for (size_t a = 0; a < t.shape.size(); ++a) {
      const Dim& d = t.shape[a];
      if (d.isDynamic()) {
        if (findDim(d.name) < 0)
          fail("tensor '" + t.name + "' axis " + std::to_string(a) + " uses dynamic dim '" +
               d.name + "', which is not declared in dims");
      } else if (d.size < 0) {
        fail("tensor '" + t.name + "' axis " + std::to_string(a) + " has negative size " +
             std::to_string(d.size));
      }
    }
    if (t.alignment > 1 && !isPowerOfTwo(t.alignment))
      fail("tensor '" + t.name + "' alignment " + std::to_string(t.alignment) +
           " is not a power of two");
  }
  for (const ScalarParam& s : scalars) claim(s.name, "scalar");
}

std::string formatShape(const std::vector<Dim>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i].isDynamic() ? shape[i].name : std::to_string(shape[i].size);
  }
  return out + "]";
}

std::string KernelSignature::toString() const {
  std::string out = kernel + "(";
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorParam& t = tensors[i];
    if (i) out += ", ";
    if (t.isOutput) out += "out ";
    out += t.name + ": " + std::string(dtypeName(t.dtype)) + formatShape(t.shape);
    if (!t.contiguous) out += " strided";
    if (t.passStrides) out += " +strides";
  }
  if (!dims.empty()) {
    out += "; ";
    for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + dims[i].name;
  }
  if (!scalars.empty()) {
    out += "; ";
    for (size_t i = 0; i < scalars.size(); ++i)
      out += (i ? ", " : "") + scalars[i].name + ": " + std::string(dtypeName(scalars[i].dtype));
  }
  return out + ")";
}

std::string KernelSignature::describeTensor(size_t index) const {
  const TensorParam& t = tensors[index];
  size_t role = 0;
  for (size_t i = 0; i < index; ++i) role += tensors[i].isOutput == t.isOutput ? 1 : 0;
  return "tensor '" + t.name + "' (" + (t.isOutput ? "output " : "input ") +
         std::to_string(role) + ")";
}

}  // namespace kiln::rt
