// The throttle decorator: parameters are validated, bytes pass through, and the device
// model's completion times match values worked out by hand. (Measured rates belong to
// benchmarks, not tests.)
#include <cstring>

#include "../../../plugins/storage/throttle/link_model.hpp"
#include "conformance_support.hpp"

using k3::storage::throttle::LinkModel;
using namespace k3test;

TEST_CASE("throttle: bad parameters are refused naming the key", "[throttle]") {
  auto refused = [](const k3::PluginParams& params, const std::string& key) {
    INFO(key);
    CHECK_THROWS_WITH(plugin_host().create_storage("throttle", params), Catch::Contains(key));
  };
  refused({{"bandwidth_mbps", "-1"}}, "bandwidth_mbps");
  refused({{"bandwidth_mbps", "fast"}}, "bandwidth_mbps");
  refused({{"latency_us", "-5"}}, "latency_us");
  refused({{"latency_us", "1e12"}}, "latency_us");
  refused({{"max_inflight", "-1"}}, "max_inflight");
  refused({{"max_inflight", "2.5"}}, "max_inflight");
  refused({{"bandwidth", "100"}}, "bandwidth");
  refused({{"inner", "mmap"}, {"inner.advice", "often"}}, "advice");
}

TEST_CASE("throttle: bytes pass through unchanged", "[throttle]") {
  TempDir dir;
  const auto data = random_bytes(300000, 3);
  const auto path = (dir.path() / "d.bin").string();
  write_file(path, data);
  auto file = open_file(*plugin_host().create_storage(
                            "throttle", {{"bandwidth_mbps", "2000"}, {"latency_us", "20"}, {"max_inflight", "2"}}),
                        path);
  std::vector<OwnedRequest> owned;
  owned.emplace_back(1, 100000);
  owned.emplace_back(150000, 150000);
  REQUIRE(read_batch(*file, owned).ok());
  CHECK(std::memcmp(owned[0].buffer.data(), data.data() + 1, 100000) == 0);
  CHECK(std::memcmp(owned[1].buffer.data(), data.data() + 150000, 150000) == 0);
}

TEST_CASE("throttle: the link model's completion times, worked by hand", "[throttle]") {
  // 1 MB/s, 1 ms latency, 2 slots. Three 1000-byte requests issued at t = 0:
  //  #1 begins 0, transfers from 0.001 for 0.001 -> 0.002
  //  #2 begins 0, transfer waits for the link (0.002) -> 0.003
  //  #3 waits for a slot (earliest free 0.002), latency to 0.003, link free 0.003 -> 0.004
  LinkModel m(1e6, 1e-3, 2);
  CHECK(m.issue(0.0, 1000) == Approx(0.002).margin(1e-12));
  CHECK(m.issue(0.0, 1000) == Approx(0.003).margin(1e-12));
  CHECK(m.issue(0.0, 1000) == Approx(0.004).margin(1e-12));
  // Issued later than everything: an idle device, latency + transfer only.
  CHECK(m.issue(1.0, 500) == Approx(1.0 + 0.001 + 0.0005).margin(1e-12));

  // Unlimited bandwidth and slots: latency only, fully overlapped.
  LinkModel latency_only(0, 2e-3, 0);
  CHECK(latency_only.issue(5.0, 1 << 30) == Approx(5.002).margin(1e-12));
  CHECK(latency_only.issue(5.0, 1 << 30) == Approx(5.002).margin(1e-12));

  // Bandwidth only: requests queue on the link back to back.
  LinkModel link(1e9, 0, 0);
  CHECK(link.issue(0.0, 500'000'000) == Approx(0.5).margin(1e-12));
  CHECK(link.issue(0.1, 250'000'000) == Approx(0.75).margin(1e-12));
}
