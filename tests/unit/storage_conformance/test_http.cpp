// The http backend: its range planning, header parsing, version checks and redirect origins
// alone, then the storage contract
// (sdk/k3/storage.hpp) against nginx on loopback: random batches round-trip, past the end is
// short_read, a missing file is not_found, four threads at once, a file changed after open
// is refused, list() is unsupported, bad parameters are refused naming the key. Without
// nginx the server cases are a SKIP with the reason.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <thread>

#include "../../../plugins/storage/http/http_response.hpp"
#include "../../../plugins/storage/http/origin.hpp"
#include "../../../plugins/storage/http/range_plan.hpp"
#include "../../../plugins/storage/http/validators.hpp"
#include "conformance_support.hpp"
#include "loopback_http.hpp"

using k3::sdk::ReadRequest;
using k3::sdk::StatusCode;
using namespace k3test;
namespace http = k3::storage::http;

namespace {

bool has_http() {
  for (const auto& p : plugin_host().plugins())
    if (p.kind == k3::PluginKind::storage && p.name == "http") return true;
  return false;
}

/// nginx serving a fresh folder; nullptr after a WARN when it cannot run here.
struct Served {
  TempDir dir;
  std::unique_ptr<k3::test::LoopbackHttp> server;
  std::string url;  ///< base URL ending in '/'
};

std::unique_ptr<Served> serve() {
  if (!has_http()) {
    WARN("SKIP: the http storage plugin is not built (no libcurl)");
    return nullptr;
  }
  auto s = std::make_unique<Served>();
  std::filesystem::create_directories(s->dir.path() / "root");
  s->server = std::make_unique<k3::test::LoopbackHttp>(s->dir.path() / "root", s->dir.path() / "server");
  if (s->server->url().empty()) {
    WARN("SKIP: " << s->server->skip_reason());
    return nullptr;
  }
  s->url = s->server->url();
  return s;
}

constexpr std::uint64_t kFileSize = (std::uint64_t{3} << 20) + 12345;

}  // namespace

TEST_CASE("http: pieces are cut at max_range and merged when adjacent, within the gap and the cap", "[http]") {
  std::vector<std::byte> a(100), b(100);
  std::vector<http::Piece> pieces;
  http::cut_pieces(0, 1000, 10000, a.data(), 4096, pieces);
  REQUIRE(pieces.size() == 3);
  CHECK((pieces[0].offset == 1000 && pieces[0].length == 4096));
  CHECK((pieces[2].offset == 1000 + 8192 && pieces[2].length == 10000 - 8192));
  CHECK(pieces[1].dest == a.data() + 4096);

  // Adjacent, overlapping, within the gap, past the gap, and past the cap.
  std::vector<http::Piece> p{{0, 0, 10, a.data()}, {1, 10, 10, a.data()}, {2, 15, 10, a.data()},
                             {3, 30, 5, a.data()}, {4, 100, 5, b.data()}, {5, 105, 60, b.data()}};
  auto ranges = http::plan_ranges(p, 0, 1000);
  REQUIRE(ranges.size() == 3);  // [0,25) [30,35) [100,165)
  CHECK((ranges[0].first == 0 && ranges[0].end == 25 && ranges[0].pieces.size() == 3));
  CHECK((ranges[1].first == 30 && ranges[1].end == 35));
  CHECK((ranges[2].first == 100 && ranges[2].end == 165));
  ranges = http::plan_ranges(p, 5, 1000);
  REQUIRE(ranges.size() == 2);  // the 5-byte gap at 25..30 is bridged
  CHECK((ranges[0].first == 0 && ranges[0].end == 35));
  ranges = http::plan_ranges(p, 0, 50);
  REQUIRE(ranges.size() == 4);  // 105..165 would make the last range 65 bytes
  CHECK((ranges[3].first == 105 && ranges[3].end == 165));
}

TEST_CASE("http: scatter copies a range's bytes into every piece, overlaps and gaps included", "[http]") {
  std::vector<std::byte> file(64);
  for (std::size_t i = 0; i < file.size(); ++i) file[i] = static_cast<std::byte>(i);
  std::vector<std::byte> x(20, std::byte{0xEE}), y(10, std::byte{0xEE}), z(4, std::byte{0xEE});
  auto ranges = http::plan_ranges({{0, 2, 20, x.data()}, {1, 12, 10, y.data()}, {2, 30, 4, z.data()}}, 8, 1000);
  REQUIRE(ranges.size() == 1);
  const auto& r = ranges[0];
  std::size_t cursor = 0;
  for (std::uint64_t at = r.first; at < r.end; at += 3) {  // arrives in 3-byte chunks
    const std::uint64_t n = std::min<std::uint64_t>(3, r.end - at);
    http::scatter(r, cursor, at, file.data() + at, n);
  }
  CHECK(std::memcmp(x.data(), file.data() + 2, 20) == 0);
  CHECK(std::memcmp(y.data(), file.data() + 12, 10) == 0);
  CHECK(std::memcmp(z.data(), file.data() + 30, 4) == 0);
}

TEST_CASE("http: Content-Range and response headers are parsed, redirects reset them", "[http]") {
  auto cr = http::parse_content_range("bytes 10-19/100");
  REQUIRE(cr);
  CHECK((cr->first == 10 && cr->last == 19 && cr->total == 100u && !cr->unsatisfied));
  cr = http::parse_content_range("bytes */0");
  REQUIRE(cr);
  CHECK((cr->unsatisfied && cr->total == 0u));
  CHECK_FALSE(http::parse_content_range("bytes 10-19/*")->total.has_value());
  for (const char* bad : {"", "bytes", "bytes 19-10/100", "items 0-1/2", "bytes 0-1", "bytes a-1/2", "bytes */*"})
    CHECK_FALSE(http::parse_content_range(bad).has_value());

  http::ResponseHeaders h;
  h.feed("HTTP/1.1 302 Found\r\n");
  h.feed("ETag: \"old\"\r\n");
  h.feed("HTTP/2 206\r\n");
  h.feed("content-range:  bytes 0-0/5 \r\n");
  h.feed("Last-Modified: Tue, 01 Dec 2026 20:00:00 GMT\r\n");
  CHECK(h.status == 206);
  CHECK(h.content_range == std::optional<std::string>("bytes 0-0/5"));
  CHECK_FALSE(h.etag.has_value());
  CHECK(h.last_modified.has_value());
  CHECK(http::shown_url("https://b.s3/x?X-Amz-Signature=abc") == "https://b.s3/x?…");
}

TEST_CASE("http: every answer must carry the size and validators seen at open, present or absent alike", "[http]") {
  using S = std::optional<std::string>;
  http::Version v{100, S("\"e1\""), S("Tue, 01 Dec 2026 20:00:00 GMT")};
  CHECK(v.validated());
  CHECK(v.differs(100u, v.etag, v.last_modified).empty());
  CHECK(v.differs(std::nullopt, v.etag, v.last_modified).empty());  // "bytes a-b/*": no size said
  CHECK(v.differs(101u, v.etag, v.last_modified) == "size 100 at open, now 101");
  CHECK(v.differs(100u, S("\"e2\""), v.last_modified) == "ETag '\"e1\"' at open, now '\"e2\"'");
  CHECK(v.differs(100u, std::nullopt, v.last_modified) == "ETag '\"e1\"' at open, now none");
  CHECK(v.differs(100u, v.etag, std::nullopt) == "Last-Modified 'Tue, 01 Dec 2026 20:00:00 GMT' at open, now none");
  CHECK(v.precondition() == "If-Match: \"e1\"");
  // A weak ETag never passes If-Match (strong comparison): the date is asked instead.
  const http::Version weak{100, S("W/\"e1\""), S("Tue, 01 Dec 2026 20:00:00 GMT")};
  CHECK(weak.precondition() == "If-Unmodified-Since: Tue, 01 Dec 2026 20:00:00 GMT");
  // Last-Modified alone; one that appears later is a difference too.
  const http::Version lm{5, std::nullopt, S("Mon")};
  CHECK(lm.validated());
  CHECK(lm.differs(5u, S("\"x\""), S("Mon")) == "ETag none at open, now '\"x\"'");
  CHECK(lm.differs(5u, std::nullopt, S("Tue")) == "Last-Modified 'Mon' at open, now 'Tue'");
  const http::Version none{5, std::nullopt, std::nullopt};
  CHECK_FALSE(none.validated());
  CHECK(none.precondition().empty());
  CHECK_THAT(http::changed_message("u: bytes 0-1", "size 1 at open, now 2"),
             Catch::Contains("u: bytes 0-1: the file changed on the server while reading (size 1 at open, now 2)"));
}

TEST_CASE("http: a redirect's origin is its scheme, host and port", "[http]") {
  const auto o = http::origin_of("https://User@Models.Example.com/K3/x?sig=1");
  REQUIRE(o);
  CHECK((o->scheme == "https" && o->host == "models.example.com" && o->port == 443u));
  CHECK(http::origin_of("HTTPS://models.example.com:443/") == o);
  CHECK(http::origin_of("http://models.example.com/K3") != o);        // another scheme
  CHECK(http::origin_of("https://cdn.example.com/K3") != o);          // another host
  CHECK(http::origin_of("https://models.example.com:8443/K3") != o);  // another port
  CHECK(http::origin_of("http://127.0.0.1:8080/m")->port == 8080u);
  CHECK(http::origin_of("http://[::1]:81/m")->host == "[::1]");
  for (const char* bad : {"ftp://h/x", "file:///etc/passwd", "/local/path", "http://", "http://h:0/", "http://h:99999/",
                          "http://[::1/x", "http://h:8a/"})
    CHECK_FALSE(http::origin_of(bad).has_value());
}

TEST_CASE("http: bad parameters are refused naming the key, list() is unsupported, only URLs open", "[http]") {
  if (!has_http()) {
    WARN("SKIP: the http storage plugin is not built (no libcurl)");
    return;
  }
  for (const k3::PluginParams& bad : std::vector<k3::PluginParams>{{{"connections", "0"}},
                                                                   {{"connections", "x"}},
                                                                   {{"retries", "-1"}},
                                                                   {{"max_range_bytes", "10"}},
                                                                   {{"http_version", "3"}},
                                                                   {{"ca_bundle", "/no/such/ca.pem"}},
                                                                   {{"bearer_token_env", "K3_NO_SUCH_VARIABLE_SET"}},
                                                                   {{"tls_verify", "maybe"}},
                                                                   {{"read_timeout_s", "-1"}},
                                                                   {{"allow_unvalidated", "maybe"}},
                                                                   {{"no_such_key", "1"}}}) {
    INFO(bad[0].first);
    CHECK_THROWS_WITH(plugin_host().create_storage("http", bad), Catch::Contains(bad[0].first));
  }
  auto backend = plugin_host().create_storage("http", {});
  std::vector<std::string> names{"stale"};
  const auto st = backend->list("http://127.0.0.1:1/m/", names);
  CHECK(st.code == StatusCode::unsupported);
  CHECK_THAT(st.detail, Catch::Contains("model.safetensors.index.json"));
  CHECK(names.empty());
  std::unique_ptr<k3::sdk::StorageFile> file;
  CHECK(backend->open("/etc/hostname", file).code == StatusCode::invalid_argument);
}

TEST_CASE("http over nginx: random batches round-trip, and past the end is short_read", "[http]") {
  auto s = serve();
  if (!s) return;
  const auto data = random_bytes(kFileSize, 51);
  write_file(s->dir.path() / "root" / "data.bin", data);
  for (const k3::PluginParams& params :
       std::vector<k3::PluginParams>{{},
                                     {{"connections", "1"}, {"http_version", "1.1"}},
                                     {{"max_range_bytes", "4096"}, {"coalesce_gap_bytes", "4096"}}}) {
    INFO("params " << params.size());
    auto backend = plugin_host().create_storage("http", params);
    auto file = open_file(*backend, s->url + "data.bin");
    CHECK(file->size() == kFileSize);
    std::mt19937_64 rng(9);
    for (int b = 0; b < 8; ++b) {
      const std::size_t n = 1 + rng() % 16;
      std::vector<RandomRequest> wanted;
      std::vector<GuardedBuffer> buffers;
      std::vector<ReadRequest> batch;
      for (std::size_t i = 0; i < n; ++i) {
        wanted.push_back(random_request(rng, data.size()));
        buffers.emplace_back(wanted.back().length, wanted.back().shift);
      }
      for (std::size_t i = 0; i < n; ++i)
        batch.push_back({wanted[i].offset, wanted[i].length, buffers[i].data(), StatusCode::internal});
      const auto st = file->read(batch);
      INFO(st.detail);
      REQUIRE(st.ok());
      for (std::size_t i = 0; i < n; ++i) {
        CHECK(batch[i].result == StatusCode::ok);
        CHECK(std::memcmp(buffers[i].data(), data.data() + wanted[i].offset, wanted[i].length) == 0);
        CHECK(buffers[i].guards_intact());
      }
    }
    const std::uint64_t straddle = kFileSize - 100;
    std::vector<OwnedRequest> owned;
    owned.emplace_back(0, 5000);
    owned.emplace_back(straddle, 4096);
    owned.emplace_back(kFileSize + 8192, 10);
    owned.emplace_back(kFileSize, 0);
    const auto st = read_batch(*file, owned);
    CHECK(st.code == StatusCode::short_read);
    CHECK_THAT(st.detail, Catch::Contains("offset " + std::to_string(straddle)) && Catch::Contains("got 100 of 4096"));
    CHECK(owned[0].request.result == StatusCode::ok);
    CHECK(std::memcmp(owned[0].buffer.data(), data.data(), 5000) == 0);
    CHECK(std::memcmp(owned[1].buffer.data(), data.data() + straddle, 100) == 0);
    CHECK(owned[1].request.result == StatusCode::short_read);
    CHECK(owned[2].request.result == StatusCode::short_read);
    CHECK(owned[3].request.result == StatusCode::ok);
  }
}

TEST_CASE("http over nginx: missing file, empty file, four threads at once, a file changed after open", "[http]") {
  auto s = serve();
  if (!s) return;
  const auto data = random_bytes(kFileSize, 52);
  const auto root = s->dir.path() / "root";
  write_file(root / "data.bin", data);
  write_file(root / "empty.bin", {});
  auto backend = plugin_host().create_storage("http", {{"connections", "4"}});
  std::unique_ptr<k3::sdk::StorageFile> file;
  auto st = backend->open(s->url + "no-such.bin", file);
  CHECK(st.code == StatusCode::not_found);
  CHECK_THAT(st.detail, Catch::Contains("no-such.bin"));
  auto empty = open_file(*backend, s->url + "empty.bin");
  CHECK(empty->size() == 0);

  auto shared = open_file(*backend, s->url + "data.bin");
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int b = 0; b < 10; ++b) {
        const auto r = random_request(rng, kFileSize);
        std::vector<std::byte> buf(r.length);
        ReadRequest req{r.offset, r.length, buf.data(), StatusCode::internal};
        // std::equal, not memcmp: a zero-length request has an empty buffer whose data() may
        // be null, and memcmp(nullptr, ..., 0) is undefined (UBSan reports it).
        const auto from = data.begin() + static_cast<std::ptrdiff_t>(r.offset);
        if (!shared->read({&req, 1}).ok() || !std::equal(buf.begin(), buf.end(), from)) ++bad;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(bad.load() == 0);

  // Rewritten in place with a later mtime: nginx's ETag changes; the open file refuses it.
  auto changed = random_bytes(kFileSize, 53);
  write_file(root / "data.bin", changed);
  const auto later = std::filesystem::last_write_time(root / "data.bin") + std::chrono::seconds(5);
  std::filesystem::last_write_time(root / "data.bin", later);
  std::vector<OwnedRequest> owned;
  owned.emplace_back(4096, 100);
  st = read_batch(*shared, owned);
  CHECK(st.code == StatusCode::io_error);
  CHECK_THAT(st.detail,
             Catch::Contains("data.bin: bytes 4096-4195") && Catch::Contains("changed on the server while reading"));
  CHECK(owned[0].request.result == StatusCode::io_error);
}
