// Everything a kiln user includes: the DSL, the op library, the text form,
// the reference evaluator, compile() and Kernel, tensor views and buffers.
#pragma once

#include "kiln/dsl/graph.h"
#include "kiln/dsl/ops.h"
#include "kiln/dsl/oplib.h"
#include "kiln/dsl/reference.h"
#include "kiln/dsl/text.h"
#include "kiln/kernel.h"
#include "kiln/runtime/device_buffer.h"
#include "kiln/runtime/driver.h"
