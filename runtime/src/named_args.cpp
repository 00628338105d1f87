// The by-name launch path: resolves names to signature positions, then packs
// through the positional path so both produce identical blocks.
#include <vector>

#include "kiln/error.h"
#include "kiln/runtime/arg_packer.h"

namespace kiln::rt {

NamedArgs& NamedArgs::tensor(std::string name, TensorView view) {
  tensors_.emplace_back(std::move(name), std::move(view));
  return *this;
}

NamedArgs& NamedArgs::dim(std::string name, int64_t value) {
  dims_.emplace_back(std::move(name), value);
  return *this;
}

NamedArgs& NamedArgs::scalar(std::string name, ScalarArg value) {
  scalars_.emplace_back(std::move(name), value);
  return *this;
}

void ArgPacker::pack(ArgBlock& out, const NamedArgs& args) const {
  const size_t T = sig_.tensors.size(), D = sig_.dims.size(), S = sig_.scalars.size();

  auto unknown = [&](const std::string& name, const char* givenAs) {
    std::string actual;
    if (sig_.findTensor(name) >= 0) actual = "a tensor";
    else if (sig_.findDim(name) >= 0) actual = "a dynamic dim";
    else if (sig_.findScalar(name) >= 0) actual = "a scalar";
    if (!actual.empty())
      fail("'" + name + "' was given as " + givenAs + ", but it is " + actual);
    std::string all;
    for (const TensorParam& t : sig_.tensors) all += (all.empty() ? "" : ", ") + t.name;
    for (const DimParam& d : sig_.dims) all += (all.empty() ? "" : ", ") + d.name;
    for (const ScalarParam& s : sig_.scalars) all += (all.empty() ? "" : ", ") + s.name;
    fail("no parameter named '" + name + "' (given as " + givenAs + "); the kernel takes: " +
         (all.empty() ? "nothing" : all));
  };

  std::vector<const TensorView*> tensors(T, nullptr);
  for (const auto& [name, view] : args.tensors_) {
    const int i = sig_.findTensor(name);
    if (i < 0) unknown(name, "a tensor");
    if (tensors[i]) fail(sig_.describeTensor(i) + " was given twice");
    tensors[i] = &view;
  }
  for (size_t i = 0; i < T; ++i)
    if (!tensors[i]) fail("missing " + sig_.describeTensor(i));

  std::vector<int64_t> dims(D, kInferDim);
  std::vector<bool> dimGiven(D, false);
  for (const auto& [name, value] : args.dims_) {
    const int i = sig_.findDim(name);
    if (i < 0) unknown(name, "a dim");
    if (dimGiven[i]) fail("dim '" + name + "' was given twice");
    dimGiven[i] = true;
    dims[i] = value;
  }

  std::vector<ScalarArg> scalars(S);
  std::vector<bool> scalarGiven(S, false);
  for (const auto& [name, value] : args.scalars_) {
    const int i = sig_.findScalar(name);
    if (i < 0) unknown(name, "a scalar");
    if (scalarGiven[i]) fail("scalar '" + name + "' was given twice");
    scalarGiven[i] = true;
    scalars[i] = value;
  }
  for (size_t i = 0; i < S; ++i)
    if (!scalarGiven[i])
      fail("missing scalar '" + sig_.scalars[i].name + "' (" +
           std::string(dtypeName(sig_.scalars[i].dtype)) + ")");

  packPointers(out, tensors.data(), T, dims.data(), D, scalars.data(), S);
}

}  // namespace kiln::rt
