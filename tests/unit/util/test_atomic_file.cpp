// util/atomic_file: a file appears whole on commit() or not at all, and no temporary file
// is ever left behind, not even by a process that exits at once (remove_live_temporaries).
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <k3/error.hpp>
#include <k3/temporaries.hpp>

#include "util/atomic_file.hpp"
#include "util_test_support.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using k3::AtomicFile;

TEST_CASE("the temporary name is the target's with .tmp.<pid>", "[util][atomic_file]") {
  const fs::path t = k3::atomic_temp_path("runs/report.json");
  CHECK(t == fs::path("runs/report.json.tmp." + std::to_string(::getpid())));
}

TEST_CASE("commit leaves exactly the written bytes under the target and no temporary file", "[util][atomic_file]") {
  const k3::test::ScratchDir dir("commit");
  const fs::path target = dir / "data.bin";
  {
    AtomicFile f(target);
    // While writing, only the temporary file exists.
    CHECK(fs::exists(f.temp_path()));
    CHECK_FALSE(fs::exists(target));
    f.write("HEADER--");
    f.write("body");
    f.pwrite("header", 6, 0);  // patch the front, as the trace writer does
    f.resize(16);              // grow: the rest reads as zeros
    f.commit();
    CHECK(f.committed());
  }
  const std::string got = k3::test::read_whole(target);
  CHECK(got == std::string("header--body\0\0\0\0", 16));
  CHECK(k3::test::listing(dir.path()) == "data.bin\n");
  struct stat st {};
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 0444) == 0444);  // readable like any file we write (umask permitting)
}

TEST_CASE("commit replaces an existing file, an abandoned writer leaves it as it was", "[util][atomic_file]") {
  const k3::test::ScratchDir dir("replace");
  const fs::path target = dir / "state.k3s";
  k3::write_file_atomically(target, "old contents");
  SECTION("an exception before commit") {
    try {
      AtomicFile f(target);
      f.write("half of the new conte");
      throw std::runtime_error("the run failed");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "the run failed");
    }
    CHECK(k3::test::read_whole(target) == "old contents");
    CHECK(k3::test::listing(dir.path()) == "state.k3s\n");
  }
  SECTION("a commit") {
    {
      AtomicFile f(target);
      f.write("new contents, longer than the old");
      f.commit();
    }
    CHECK(k3::test::read_whole(target) == "new contents, longer than the old");
    CHECK(k3::test::listing(dir.path()) == "state.k3s\n");
  }
}

TEST_CASE("an exception before commit leaves no file and no temporary file", "[util][atomic_file]") {
  const k3::test::ScratchDir dir("abandon");
  const fs::path target = dir / "trace.k3t";
  fs::path temp;
  try {
    AtomicFile f(target);
    temp = f.temp_path();
    std::vector<char> big(1 << 20, 'x');
    f.write(big.data(), big.size());
    REQUIRE(fs::file_size(temp) == big.size());
    throw k3::RuntimeError("interrupted");
  } catch (const k3::RuntimeError&) {
  }
  CHECK_FALSE(temp.empty());
  CHECK_FALSE(fs::exists(temp));
  CHECK_FALSE(fs::exists(target));
  CHECK(k3::test::listing(dir.path()).empty());
}

TEST_CASE("a stale temporary file of the same name is replaced, not appended to", "[util][atomic_file]") {
  const k3::test::ScratchDir dir("stale");
  const fs::path target = dir / "r.json";
  k3::write_file_atomically(k3::atomic_temp_path(target), "left over by a crashed run with our pid");
  k3::write_file_atomically(target, "{}");
  CHECK(k3::test::read_whole(target) == "{}");
  CHECK(k3::test::listing(dir.path()) == "r.json\n");
}

TEST_CASE("write_file_atomically creates the folders its path names", "[util][atomic_file]") {
  const k3::test::ScratchDir dir("folders");
  const fs::path target = dir / "runs/today/report.json";
  k3::write_file_atomically(target, std::string_view("{\"ok\": true}\n"));
  CHECK(k3::test::read_whole(target) == "{\"ok\": true}\n");
  CHECK(k3::test::listing(target.parent_path()) == "report.json\n");
}

TEST_CASE("failures name the file and the reason", "[util][atomic_file]") {
  const k3::test::ScratchDir dir("errors");
  SECTION("a folder that does not exist") {
    const fs::path target = dir / "missing/out.bin";
    try {
      AtomicFile f(target);
      FAIL("no error");
    } catch (const k3::RuntimeError& e) {
      CHECK_THAT(std::string(e.what()), Contains(k3::atomic_temp_path(target).string() + ": cannot create: ") &&
                                            Contains(std::strerror(ENOENT)));
    }
  }
  SECTION("writing after commit, committing twice") {
    AtomicFile f(dir / "once.bin");
    f.write("x");
    f.commit();
    CHECK_THROWS_WITH(f.write("y"), Contains("once.bin: written after commit()"));
    CHECK_THROWS_WITH(f.commit(), Contains("once.bin: committed twice"));
    CHECK(k3::test::read_whole(dir / "once.bin") == "x");
  }
  SECTION("a target that is a folder: refused before anything is written") {
    fs::create_directories(dir / "taken" / "inside");
    CHECK_THROWS_AS(AtomicFile(dir / "taken"), k3::UsageError);
    CHECK_THROWS_WITH(AtomicFile(dir / "taken"), Contains("taken: a folder, not a regular file"));
    CHECK(fs::is_directory(dir / "taken" / "inside"));
    CHECK(k3::test::listing(dir.path()) == "taken\n");
  }
  SECTION("a target that became a folder while it was written: refused at commit, the temporary file goes") {
    {
      AtomicFile f(dir / "taken");
      f.write("x");
      fs::create_directories(dir / "taken" / "inside");
      CHECK_THROWS_WITH(f.commit(), Contains("taken: a folder, not a regular file"));
    }
    CHECK(fs::is_directory(dir / "taken" / "inside"));
    CHECK(k3::test::listing(dir.path()) == "taken\n");
  }
  SECTION("syncing a folder that does not exist") {
    CHECK_THROWS_WITH(k3::sync_directory(dir / "nope"), Contains("nope: cannot open to sync: "));
  }
}

TEST_CASE("an unfinished writer's temporary is registered until it is committed or dropped",
          "[util][atomic_file][signal]") {
  const k3::test::ScratchDir dir("registry");
  const int before = k3::live_temporary_count();
  {
    AtomicFile committed(dir / "a.json");
    AtomicFile dropped(dir / "b.json");
    CHECK(k3::live_temporary_count() == before + 2);
    committed.write("{}");
    committed.commit();
    CHECK(k3::live_temporary_count() == before + 1);
  }
  CHECK(k3::live_temporary_count() == before);
  CHECK(k3::test::listing(dir.path()) == "a.json\n");
}

TEST_CASE("remove_live_temporaries unlinks every unfinished temporary and no committed file",
          "[util][atomic_file][signal]") {
  const k3::test::ScratchDir dir("remove-live");
  k3::write_file_atomically(dir / "report.json", "old report");
  AtomicFile done(dir / "done.bin");
  done.write("complete");
  done.commit();
  AtomicFile trace(dir / "trace.k3trace");
  trace.write("half a trace");
  AtomicFile report(dir / "report.json");
  report.write("half a new report");
  REQUIRE(fs::exists(trace.temp_path()));
  REQUIRE(fs::exists(report.temp_path()));
  k3::remove_live_temporaries();  // what the second Ctrl-C does before _exit
  CHECK_FALSE(fs::exists(trace.temp_path()));
  CHECK_FALSE(fs::exists(report.temp_path()));
  CHECK(k3::test::listing(dir.path()) == "done.bin\nreport.json\n");
  CHECK(k3::test::read_whole(dir / "report.json") == "old report");
  CHECK(k3::test::read_whole(dir / "done.bin") == "complete");
  // Each temporary is claimed once: a second sweep finds nothing more to do.
  CHECK(k3::live_temporary_count() == 0);
  k3::remove_live_temporaries();
}

TEST_CASE("writers beyond the registry's capacity still work, unregistered", "[util][atomic_file][signal]") {
  const k3::test::ScratchDir dir("registry-full");
  std::vector<std::unique_ptr<k3::LiveTemporary>> live;
  int registered = 0;
  for (int i = 0; i < 100; ++i) {
    live.push_back(std::make_unique<k3::LiveTemporary>(dir / ("t" + std::to_string(i))));
    registered += live.back()->registered() ? 1 : 0;
  }
  CHECK(registered > 0);
  CHECK(registered < 100);  // the table is fixed: no allocation in a signal handler
  CHECK(k3::live_temporary_count() == registered);
  // A writer with no slot left writes and commits as usual.
  k3::write_file_atomically(dir / "still.txt", "fine");
  CHECK(k3::test::read_whole(dir / "still.txt") == "fine");
  live.clear();
  CHECK(k3::live_temporary_count() == 0);
  // A path no file could be created under is not registered.
  CHECK_FALSE(k3::LiveTemporary(fs::path(std::string(PATH_MAX, 'x'))).registered());
}

TEST_CASE("append_record adds whole records at the end, creating the file and its folders", "[util][atomic_file]") {
  const k3::test::ScratchDir dir("append");
  const fs::path log = dir / "chats/a.jsonl";
  k3::append_record(log, "one\n");
  k3::append_record(log, "two\n");
  CHECK(k3::test::read_whole(log) == "one\ntwo\n");
  CHECK(k3::test::listing(log.parent_path()) == "a.jsonl\n");  // no temporary file

  // Two writers at once: every record lands whole, none split by the other's.
  const fs::path shared = dir / "shared.log";
  auto writer = [&](char c) {
    for (int i = 0; i < 100; ++i) k3::append_record(shared, std::string(8192, c) + "\n");
  };
  std::thread a(writer, 'a'), b(writer, 'b');
  a.join();
  b.join();
  const std::string all = k3::test::read_whole(shared);
  std::size_t lines = 0;
  for (std::size_t at = 0; at < all.size(); at += 8193, ++lines) {
    REQUIRE(at + 8193 <= all.size());
    const std::string_view rec(all.data() + at, 8193);
    CHECK(rec.back() == '\n');
    CHECK(rec.find_first_not_of(rec[0]) == 8192);
  }
  CHECK(lines == 200);

  fs::create_directories(dir / "folder");
  CHECK_THROWS_WITH(k3::append_record(dir / "folder", "x\n"), Contains("folder: a folder, not a regular file"));
}
