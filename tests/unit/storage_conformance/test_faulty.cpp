// The faulty decorator: injected faults come back as the right codes naming the offset,
// transient ones succeed on retry, and the pattern depends on (seed, offset, length) only.
#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "conformance_support.hpp"

using k3::sdk::StatusCode;
using namespace k3test;

namespace {

struct Fixture {
  TempDir dir;
  std::vector<std::byte> data = random_bytes(1 << 20, 9);
  std::string path = (dir.path() / "data.bin").string();
  Fixture() { write_file(path, data); }
};

std::shared_ptr<k3::sdk::StorageBackend> faulty(k3::PluginParams params) {
  return plugin_host().create_storage("faulty", params);
}

/// Reads one request; returns its status.
k3::sdk::Status read_one(k3::sdk::StorageFile& file, std::uint64_t offset, std::uint64_t length,
                         std::vector<std::byte>* out = nullptr) {
  std::vector<OwnedRequest> owned;
  owned.emplace_back(offset, length);
  k3::sdk::Status st = read_batch(file, owned);
  if (out != nullptr) *out = owned[0].buffer;
  return st;
}

}  // namespace

TEST_CASE("faulty: eio_rate=1 fails every request with io_error naming its offset, a retry succeeds", "[faulty]") {
  Fixture f;
  auto file = open_file(*faulty({{"eio_rate", "1"}, {"seed", "5"}}), f.path);
  const k3::sdk::Status first = read_one(*file, 12345, 777);
  CHECK(first.code == StatusCode::io_error);
  CHECK_THAT(first.detail, Catch::Contains("offset 12345") && Catch::Contains("data.bin"));
  std::vector<std::byte> got;
  const k3::sdk::Status retry = read_one(*file, 12345, 777, &got);
  REQUIRE(retry.ok());
  CHECK(std::memcmp(got.data(), f.data.data() + 12345, 777) == 0);
  // A different request is a different first attempt.
  CHECK(read_one(*file, 12345, 778).code == StatusCode::io_error);
}

TEST_CASE("faulty: transient=false fails every attempt", "[faulty]") {
  Fixture f;
  auto file = open_file(*faulty({{"eio_rate", "1"}, {"transient", "false"}}), f.path);
  for (int attempt = 0; attempt < 3; ++attempt) CHECK(read_one(*file, 4096, 100).code == StatusCode::io_error);
  CHECK(read_one(*file, 4096, 0).ok());  // zero-length never fails
}

TEST_CASE("faulty: short_read_rate=1 gives short_read naming the offset with fewer bytes than asked", "[faulty]") {
  Fixture f;
  auto file = open_file(*faulty({{"short_read_rate", "1"}}), f.path);
  const k3::sdk::Status st = read_one(*file, 5000, 3000);
  CHECK(st.code == StatusCode::short_read);
  CHECK_THAT(st.detail, Catch::Contains("short read at offset 5000: got ") && Catch::Contains(" of 3000 bytes"));
  const auto got = std::stoull(st.detail.substr(st.detail.find(": got ") + 6));
  CHECK(got < 3000);
  CHECK(read_one(*file, 5000, 3000).ok());
}

TEST_CASE("faulty: fail_offsets and fail_after_bytes always fail, transient or not", "[faulty]") {
  Fixture f;
  auto file = open_file(*faulty({{"fail_offsets", "1000, 200000"}, {"fail_after_bytes", "900000"}}), f.path);
  for (int attempt = 0; attempt < 2; ++attempt) {
    CHECK(read_one(*file, 999, 2).code == StatusCode::io_error);      // covers 1000
    CHECK(read_one(*file, 1000, 1).code == StatusCode::io_error);     // starts on it
    CHECK(read_one(*file, 199999, 10).code == StatusCode::io_error);  // covers 200000
    CHECK(read_one(*file, 899990, 11).code == StatusCode::io_error);  // ends past 900000
  }
  CHECK(read_one(*file, 0, 1000).ok());  // ends just before 1000
  CHECK(read_one(*file, 1001, 5000).ok());
  CHECK(read_one(*file, 899990, 10).ok());  // ends exactly at 900000
  std::vector<OwnedRequest> owned;
  owned.emplace_back(0, 100);
  owned.emplace_back(1000, 8);
  owned.emplace_back(300000, 100);
  const k3::sdk::Status st = read_batch(*file, owned);
  CHECK(st.code == StatusCode::io_error);
  CHECK_THAT(st.detail, Catch::Contains("offset 1000"));
  CHECK(owned[0].request.result == StatusCode::ok);
  CHECK(owned[1].request.result == StatusCode::io_error);
  CHECK(owned[2].request.result == StatusCode::ok);
  CHECK(std::memcmp(owned[2].buffer.data(), f.data.data() + 300000, 100) == 0);
}

TEST_CASE("faulty: the fault pattern depends on (seed, offset, length), not on order or threads", "[faulty]") {
  Fixture f;
  const k3::PluginParams params{{"eio_rate", "0.2"},
                                {"short_read_rate", "0.2"},
                                {"seed", "77"},
                                {"transient", "false"}};
  std::vector<std::pair<std::uint64_t, std::uint64_t>> requests;
  for (std::uint64_t i = 0; i < 400; ++i) requests.emplace_back(i * 997 % 900000, 1 + i * 31 % 5000);

  auto outcomes = [&](std::vector<std::pair<std::uint64_t, std::uint64_t>> order, int threads) {
    auto file = open_file(*faulty(params), f.path);
    std::map<std::pair<std::uint64_t, std::uint64_t>, StatusCode> out;
    std::mutex m;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (std::size_t i = static_cast<std::size_t>(t); i < order.size(); i += static_cast<std::size_t>(threads)) {
          const StatusCode c = read_one(*file, order[i].first, order[i].second).code;
          const std::lock_guard lock(m);
          out[order[i]] = c;
        }
      });
    for (auto& t : pool) t.join();
    return out;
  };
  const auto forward = outcomes(requests, 1);
  std::reverse(requests.begin(), requests.end());
  const auto backward = outcomes(requests, 4);
  CHECK(forward == backward);
  std::size_t eio = 0, shorts = 0;
  for (const auto& [key, code] : forward) {
    eio += code == StatusCode::io_error;
    shorts += code == StatusCode::short_read;
  }
  // 400 draws at 0.2, and 0.8 x 0.2 = 0.16 for short reads: well inside these bounds.
  CHECK(eio > 40);
  CHECK(eio < 120);
  CHECK(shorts > 30);
  CHECK(shorts < 100);
  // Another seed gives another pattern.
  k3::PluginParams other = params;
  other[2].second = "78";
  auto file = open_file(*faulty(other), f.path);
  std::size_t differ = 0;
  for (const auto& [key, code] : forward) differ += read_one(*file, key.first, key.second).code != code;
  CHECK(differ > 0);
}

TEST_CASE("faulty: delays do not change the bytes", "[faulty]") {
  Fixture f;
  auto file = open_file(*faulty({{"delay_rate", "1"}, {"delay_us", "200"}}), f.path);
  std::vector<std::byte> got;
  REQUIRE(read_one(*file, 3, 4099, &got).ok());
  CHECK(std::memcmp(got.data(), f.data.data() + 3, 4099) == 0);
}

TEST_CASE("faulty: bad parameters are refused naming the key", "[faulty]") {
  auto refused = [](const k3::PluginParams& params, const std::string& key) {
    INFO(key);
    CHECK_THROWS_WITH(plugin_host().create_storage("faulty", params), Catch::Contains(key));
  };
  refused({{"eio_rate", "1.5"}}, "eio_rate");
  refused({{"short_read_rate", "-0.1"}}, "short_read_rate");
  refused({{"delay_rate", "x"}}, "delay_rate");
  refused({{"fail_offsets", "12,abc"}}, "fail_offsets");
  refused({{"seed", "-3"}}, "seed");
  refused({{"transient", "sometimes"}}, "transient");
  refused({{"inner", "no-such-backend"}}, "no-such-backend");
  refused({{"inner.bogus", "1"}}, "bogus");
}

TEST_CASE("decorators compose: throttle over faulty over direct passes faults and bytes through", "[faulty]") {
  Fixture f;
  auto backend = plugin_host().create_storage("throttle", {{"inner", "faulty"},
                                                           {"inner.inner", "direct"},
                                                           {"inner.inner.threads", "2"},
                                                           {"inner.fail_offsets", "65536"},
                                                           {"inner.eio_rate", "0"},
                                                           {"bandwidth_mbps", "50000"},
                                                           {"latency_us", "10"},
                                                           {"max_inflight", "4"}});
  auto file = open_file(*backend, f.path);
  CHECK(file->alignment() == 4096);  // the innermost backend's preference shows through
  std::vector<OwnedRequest> owned;
  owned.emplace_back(0, 65536);       // ends just before the bad offset
  owned.emplace_back(65530, 100);     // covers it
  owned.emplace_back(70001, 123457);  // unaligned, through direct's bounce windows
  const k3::sdk::Status st = read_batch(*file, owned);
  CHECK(st.code == StatusCode::io_error);
  CHECK_THAT(st.detail, Catch::Contains("offset 65530"));
  CHECK(owned[0].request.result == StatusCode::ok);
  CHECK(owned[1].request.result == StatusCode::io_error);
  CHECK(owned[2].request.result == StatusCode::ok);
  CHECK(std::memcmp(owned[0].buffer.data(), f.data.data(), 65536) == 0);
  CHECK(std::memcmp(owned[2].buffer.data(), f.data.data() + 70001, 123457) == 0);
}
