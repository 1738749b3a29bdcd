// CPU kernels of the smaller ops the misc family picked up from the conformance suite.
#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {

void register_cpu_misc_extra(KernelRegistry& r) {
  (void)r;
}

}  // namespace quilt::cpu
