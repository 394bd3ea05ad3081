#pragma once
// KILN_HD and KILN_NO_EXEC_CHECK live in the core, so op schemas can share small functions with CUDA kernels too.
#include "core/host_device.h"
