// Hand-built kernels (see kiln/compiler/sample_kernels.h), written with the
// same helpers the schedules' emitters use.
#include <mlir/Dialect/Arith/IR/Arith.h>
#include <mlir/Dialect/LLVMIR/LLVMDialect.h>
#include <mlir/Dialect/Math/IR/Math.h>
#include <mlir/Dialect/SCF/IR/SCF.h>

#include "kiln/compiler/sample_kernels.h"
#include "mlir_context.h"

namespace kiln::compiler::samples {

using namespace mlir;
using detail::elementPointer;
using detail::load;
using detail::store;

namespace {
Value constI64(OpBuilder& b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
}
}  // namespace

GpuModule buildXyzBf16(int blockSize) {
  GpuModule m = detail::createGpuModule("kiln_samples");
  OpBuilder b(&detail::context(m));
  detail::KernelSignature sig;
  sig.pointers = {{"x", true}, {"y", true}, {"z", true}, {"out", false}};
  sig.sizes = {"n"};
  sig.blockSize = blockSize;
  detail::Kernel k = detail::addKernel(m, "xyz_bf16", sig, b);
  Location loc = k.loc;
  Value n = k.sizes[0];

  constexpr int kVec = 8;  // 8 x bf16 = 16 bytes
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type();
  auto vbf16 = VectorType::get({kVec}, bf16);
  auto vf32 = VectorType::get({kVec}, f32);

  Value tid = detail::globalThreadIndex(b, loc);
  Value begin = arith::MulIOp::create(b, loc, tid, constI64(b, loc, kVec));
  Value end = arith::AddIOp::create(b, loc, begin, constI64(b, loc, kVec));
  Value full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, end, n);
  auto ifOp = scf::IfOp::create(b, loc, full, /*withElseRegion=*/true);

  // x * y + z in f32, on scalars or vectors alike.
  auto compute = [&](Value x, Value y, Value z, Type wide, Type narrow) -> Value {
    Value xf = arith::ExtFOp::create(b, loc, wide, x);
    Value yf = arith::ExtFOp::create(b, loc, wide, y);
    Value zf = arith::ExtFOp::create(b, loc, wide, z);
    Value r = arith::AddFOp::create(b, loc, arith::MulFOp::create(b, loc, xf, yf), zf);
    return arith::TruncFOp::create(b, loc, narrow, r);
  };

  // All 8 elements in range: 16-byte non-coherent loads, one 16-byte store.
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  {
    Value in[3];
    for (int i = 0; i < 3; ++i)
      in[i] = load(b, loc, vbf16, elementPointer(b, loc, k.pointers[i], bf16, begin), 16,
                   /*invariant=*/true);
    Value r = compute(in[0], in[1], in[2], vf32, vbf16);
    store(b, loc, r, elementPointer(b, loc, k.pointers[3], bf16, begin), 16);
  }

  // The tail (or nothing, past the end): element by element.
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  {
    Value stop = arith::MinSIOp::create(b, loc, end, n);
    auto loop = scf::ForOp::create(b, loc, begin, stop, constI64(b, loc, 1));
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value i = loop.getInductionVar();
    Value in[3];
    for (int j = 0; j < 3; ++j)
      in[j] = load(b, loc, bf16, elementPointer(b, loc, k.pointers[j], bf16, i), 2, true);
    Value r = compute(in[0], in[1], in[2], f32, bf16);
    store(b, loc, r, elementPointer(b, loc, k.pointers[3], bf16, i), 2);
  }
  return m;
}

GpuModule buildTranscendentalF32(int blockSize) {
  GpuModule m = detail::createGpuModule("kiln_samples");
  OpBuilder b(&detail::context(m));
  detail::KernelSignature sig;
  sig.pointers = {{"x", true}, {"out", false}};
  sig.sizes = {"n"};
  sig.blockSize = blockSize;
  detail::Kernel k = detail::addKernel(m, "transcendental_f32", sig, b);
  Location loc = k.loc;
  Type f32 = b.getF32Type();

  Value tid = detail::globalThreadIndex(b, loc);
  Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, tid, k.sizes[0]);
  auto ifOp = scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/false);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  Value x = load(b, loc, f32, elementPointer(b, loc, k.pointers[0], f32, tid), 4, true);
  Value e = math::ExpOp::create(b, loc, x);
  Value erf = math::ErfOp::create(b, loc, x);
  Value th = math::TanhOp::create(b, loc, x);
  Value r = arith::AddFOp::create(b, loc, e, arith::MulFOp::create(b, loc, erf, th));
  store(b, loc, r, elementPointer(b, loc, k.pointers[1], f32, tid), 4);
  return m;
}

}  // namespace kiln::compiler::samples
