// Reusable scratch buffers for one forward call: a block asks for slot k with n elements;
// a slot grows once and is then reused, so the token loop does not allocate after warm-up.
// Slots are valid until the block returns (blocks run one after another).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace k3::model {

class Scratch {
 public:
  float* f(std::size_t slot, std::size_t n) { return grow(f_, slot, n); }
  double* d(std::size_t slot, std::size_t n) { return grow(d_, slot, n); }
  std::uint32_t* u(std::size_t slot, std::size_t n) { return grow(u_, slot, n); }

 private:
  template <class T>
  static T* grow(std::vector<std::vector<T>>& pool, std::size_t slot, std::size_t n) {
    if (pool.size() <= slot) pool.resize(slot + 1);
    if (pool[slot].size() < n) pool[slot].resize(n);
    return pool[slot].data();
  }
  std::vector<std::vector<float>> f_;
  std::vector<std::vector<double>> d_;
  std::vector<std::vector<std::uint32_t>> u_;
};

}  // namespace k3::model
