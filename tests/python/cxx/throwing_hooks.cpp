// Functions of a pluggable allocator, given by address, that throw C++
// exceptions: the library's trampoline must turn each into an error with
// its what(), and the allocator must go on working.
#include <cstddef>
#include <stdexcept>

#include "aclalloc.h"

extern "C" {

aclallocPluggableDeviceStats throwing_device_stats(int device) {
    if (device >= 0) throw std::runtime_error("device stats unavailable");
    return aclallocPluggableDeviceStats{};
}

void throwing_reset(bool) { throw std::runtime_error("reset refused"); }

}
