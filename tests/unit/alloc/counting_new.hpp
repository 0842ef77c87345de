// This test executable replaces the global operator new and delete (counting_new.cpp):
// every allocation through them, on any thread and from any library or plugin this
// process loads, is counted.
#pragma once
#include <cstdint>

namespace k3::test {

/// Allocations through operator new since the process started.
std::uint64_t allocations() noexcept;

}  // namespace k3::test
