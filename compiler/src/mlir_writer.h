// Internal: a small writer for MLIR text. kiln's emitters produce MLIR as
// text (what `kiln compile --emit=mlir` shows), parsed once by the backend;
// this keeps MLIR's C++ headers out of every emitter.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kiln/dtype.h"

namespace kiln::compiler {

class MlirWriter {
 public:
  MlirWriter() : next_(std::make_shared<int>(0)) {}
  // A writer for another region of the same function: shares the SSA
  // counter, so names never collide when the texts are spliced together.
  MlirWriter sibling() const {
    MlirWriter w;
    w.next_ = next_;
    w.indent_ = indent_;
    return w;
  }
  // A fresh SSA name: %v0, %v1, ...
  std::string fresh() { return "%v" + std::to_string((*next_)++); }
  // Appends one line at the current indentation.
  void line(const std::string& s) {
    text_.append(static_cast<size_t>(indent_) * 2, ' ');
    text_ += s;
    text_ += '\n';
  }
  // "%vN = <rhs>", returning %vN.
  std::string assign(const std::string& rhs) {
    std::string v = fresh();
    line(v + " = " + rhs);
    return v;
  }
  // Appends text written by a sibling writer (already indented).
  void append(const std::string& text) { text_ += text; }
  void indent() { ++indent_; }
  void setIndent(int i) { indent_ = i; }
  int indentLevel() const { return indent_; }
  void dedent() { --indent_; }
  const std::string& text() const { return text_; }
  std::string take() { return std::move(text_); }

  // Constants (not cached: MLIR's canonicalizer and LLVM merge duplicates).
  std::string f32(double v);                       // exact bits of (float)v
  std::string integer(int64_t v, const std::string& type);
  std::string boolean(bool v) { return assign(std::string("arith.constant ") + (v ? "true" : "false")); }

 private:
  std::string text_;
  int indent_ = 0;
  std::shared_ptr<int> next_;
};

// The register type a dtype is computed in: floats in f32, i32, i64, bool i1.
std::string computeType(DType t);
// The element type a dtype is stored as in memory: bf16, f16, f32, i32, i64,
// and i8 for bool.
std::string storageType(DType t);

// A 16-byte global load of `ptr` (!llvm.ptr<1>) as the vector type `vt`
// with an eviction priority (`priority`: "evict_first" or "evict_last") in
// L1 and in L2 (a cache policy made by createpolicy, as ld's
// .L2::cache_hint takes it): inline PTX, sm_80+ (PTX ISA 7.4). `nc`: the
// read-only path (ld.global.nc).
std::string hintedLoad16(MlirWriter& w, const std::string& ptr, const std::string& vt, const std::string& priority,
                         bool nc);
// The four i32 results of an inline asm (`s4`, a struct) as one 16-byte
// vector of the type `vt`.
std::string wordsAsVector(MlirWriter& w, const std::string& s4, const std::string& vt);
// An opaque copy of the 16-byte vector `vec` (of the type `vt`): four
// `mov`s in an inline asm with side effects, which LLVM neither removes nor
// moves across other side effects (`note` goes into its comment).
std::string opaqueCopy16(MlirWriter& w, const std::string& vec, const std::string& vt, const std::string& note);

}  // namespace kiln::compiler
