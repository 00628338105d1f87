// Everything in kiln's runtime: the driver, devices and contexts, modules,
// kernel signatures, tensor views, argument packing, launching, device
// buffers and timing. No LLVM, no MLIR, no link-time CUDA dependency.
#pragma once

#include "kiln/runtime/arg_packer.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/device_buffer.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/launch.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/signature.h"
#include "kiln/runtime/tensor_view.h"
#include "kiln/runtime/timing.h"
