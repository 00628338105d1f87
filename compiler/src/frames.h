// Internal: how a node's elements line up with a kernel's iteration space.
// A Frame maps each axis of a node to an axis of the kernel's domain
// (idx = off + coeff * domain[src], or the constant off where the node is
// broadcast), so that views (permute, slice, unit reshapes) and broadcasts
// fold into affine index math instead of being materialized. An Access is
// an input read through a frame: offset = base + sum_k strides[k] * idx_k.
// Shared by every schedule that reads graph inputs (pointwise, row
// reduction).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/dsl/graph.h"
#include "poly.h"

namespace kiln::compiler {

struct Axis {
  int src = -1;
  int64_t coeff = 0;
  int64_t off = 0;
  bool operator==(const Axis&) const = default;
};
using Frame = std::vector<Axis>;

std::string frameKey(const Frame& f);
// The frame of a node of the domain's own shape: axis k is domain axis k.
Frame identityFrame(int rank);
bool isUnit(const Dim& d);
// The frame of an operand broadcast into a consumer of shape `consumer`.
Frame broadcastFrame(const Frame& consumerFrame, const Shape& consumer, const Shape& operand);
// The frame of operand `operand` of `n` when `n` is seen through `frame`.
Frame operandFrame(const Graph& g, const Node& n, size_t operand, const Frame& frame);
// A reshape that only adds or drops unit dims (maps dim to dim).
bool unitReshape(const Node& n, const Node& x);
// Whether reduction `r` (its operand of shape `operand`), seen through
// `frame` in a row kernel over `domain`, is read at its own row: kept axis j
// is domain axis j, and a kept unit last axis is broadcast. A row kernel
// reads its own reductions only so; the planner sends other readers to a
// later kernel.
bool readsOwnRow(const Node& r, const Shape& operand, const Frame& frame, const Shape& domain);

// The frame of a value of one per row, of shape `s`, in a row kernel over
// `domain`: its non-unit axes are the domain's non-unit leading axes, in
// order (the rows' memory layout). False where `s` does not fit so. The
// row emitter places such outputs by it; the planner sees such values by
// the same rule (Planner::misreads).
bool perRowFrame(const Shape& s, const Shape& domain, Frame& out);

// A column partial (a row kernel's sums over its part of the rows): an f32
// sum over axis 1 of a reshape of a value e of shape [R, D] into
// [P, R / P, D], of shape [P, D]. The planner makes them
// (fuseColumnPartials) for a column sum of a value that a row kernel over
// [R, D] computes; that row kernel computes them, each block summing the
// rows of one part. Returns e's id, or -1.
int columnPartialOperand(const Graph& g, int id);
// Whether an output of `g` is a column partial.
bool hasColumnPartials(const Graph& g);

struct Access {
  int node = -1;              // the Input node
  std::vector<Poly> strides;  // per domain axis
  Poly base;
  std::string key() const;
};
// `inputNode` (contiguous row-major) read as a tensor of `viewShape` through
// `frame`, in a domain of `rank` axes.
Access accessOf(int inputNode, const Shape& viewShape, const Frame& frame, int rank);

// The access by which node `id`, seen through `f`, reads memory itself: an
// Input, or a reshape of one that is not a unit reshape. False otherwise.
bool directAccess(const Graph& g, int id, const Frame& f, int rank, Access& out);

// The domain axes a node's value varies along, seen through a frame (bit k:
// domain axis k), memoized per (node, frame). A reduction's value varies
// along `reductionMask` (the rows it was computed for).
class AxisDependence {
 public:
  AxisDependence(const Graph& g, int rank, uint64_t reductionMask = 0)
      : g_(g), rank_(rank), reductionMask_(reductionMask) {}
  uint64_t of(int id, const Frame& f);

 private:
  const Graph& g_;
  int rank_;
  uint64_t reductionMask_;
  std::map<std::string, uint64_t> memo_;
};

}  // namespace kiln::compiler
