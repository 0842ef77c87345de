// k3/user_files.hpp: a file a user names is read only when it is a regular file under its
// cap (a FIFO is refused at once, never waited on), and written only where nothing but a
// regular file is, outside the checkpoint folders.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/user_files.hpp>

#include "util/atomic_file.hpp"
#include "util_test_support.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

TEST_CASE("read_user_file reads a regular file, or a link to one, whole", "[util][user_file]") {
  const k3::test::ScratchDir dir("read");
  k3::write_file_atomically(dir / "prompt.txt", "Life is");
  fs::create_symlink(dir / "prompt.txt", dir / "link.txt");
  CHECK(k3::read_user_file(dir / "prompt.txt", "-f", "text file", 7) == "Life is");
  CHECK(k3::read_user_file(dir / "link.txt", "-f", "text file", 100) == "Life is");
  CHECK(k3::read_user_file(dir / "prompt.txt", "", "text file", 100) == "Life is");
}

TEST_CASE("read_user_file refuses what is not a regular file under its cap, before reading", "[util][user_file]") {
  const k3::test::ScratchDir dir("refuse");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  fs::create_directories(dir / "folder");
  // Sparse: one byte over the cap costs no disk, and is never read.
  { std::ofstream(dir / "big.txt"); }
  fs::resize_file(dir / "big.txt", 1'000'001);
  const std::vector<std::pair<fs::path, std::string>> cases{
      {dir / "fifo", "-f: " + (dir / "fifo").string() + ": a FIFO, not a text file"},
      {"/dev/null", "-f: /dev/null: a character device, not a text file"},
      {dir / "folder", "-f: " + (dir / "folder").string() + ": a folder, not a text file"},
      {dir / "none.txt", "-f: " + (dir / "none.txt").string() + ": no such file"},
      {dir / "big.txt",
       "-f: " + (dir / "big.txt").string() + ": 1000001 bytes, more than the 1000000 (1.0 MB) a text file may hold"}};
  for (const auto& [file, says] : cases) {
    CAPTURE(file);
    CHECK_THROWS_AS(k3::read_user_file(file, "-f", "text file", 1'000'000), k3::UsageError);
    CHECK_THROWS_WITH(k3::read_user_file(file, "-f", "text file", 1'000'000), says);
    CHECK_THROWS_WITH(k3::check_input_file(file, "-f", "text file", 1'000'000), says);
  }
  CHECK(k3::check_input_file(dir / "big.txt", "", "text file", 1'000'001) == 1'000'001);
}

TEST_CASE("check_output_file refuses links, devices, FIFOs, folders and the checkpoint folders", "[util][user_file]") {
  const k3::test::ScratchDir dir("output");
  const fs::path model = dir / "model";
  fs::create_directories(model);
  k3::write_file_atomically(model / "config.json", "{}");
  k3::write_file_atomically(dir / "old.json", "{}");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  fs::create_symlink(dir / "old.json", dir / "link.json");
  fs::create_directory_symlink(model, dir / "model-link");
  const std::vector<fs::path> keep_out{model};

  // Absent or a regular file, outside the checkpoint: fine.
  CHECK_NOTHROW(k3::check_output_file(dir / "new.json", "--out", keep_out));
  CHECK_NOTHROW(k3::check_output_file(dir / "old.json", "--out", keep_out));
  CHECK_NOTHROW(k3::check_output_file(dir / "sub/new.json", "--out", keep_out));
  CHECK_NOTHROW(k3::check_output_file(dir / "model2.json", "--out", keep_out));  // a sibling that shares a prefix

  const std::vector<std::pair<fs::path, std::string>> cases{
      {dir / "fifo", (dir / "fifo").string() + ": a FIFO, not a regular file"},
      {dir / "link.json", (dir / "link.json").string() + ": a symbolic link, not a regular file"},
      {"/dev/null", "/dev/null: a character device, not a regular file"},
      {model, model.string() + ": a folder, not a regular file"},
      {model / "config.json", "inside the checkpoint folder " + model.string()},
      {model / "new.json", "inside the checkpoint folder " + model.string()},
      {dir / "model-link" / "config.json", "inside the checkpoint folder " + model.string()},
      {model / ".." / "model" / "new.json", "inside the checkpoint folder " + model.string()}};
  for (const auto& [file, says] : cases) {
    CAPTURE(file);
    CHECK_THROWS_AS(k3::check_output_file(file, "--out x", keep_out), k3::UsageError);
    CHECK_THROWS_WITH(k3::check_output_file(file, "--out x", keep_out), Contains("--out x: ") && Contains(says));
  }
  // What was there is untouched.
  CHECK(fs::is_fifo(dir / "fifo"));
  CHECK(fs::is_symlink(dir / "link.json"));
  CHECK(k3::test::read_whole(model / "config.json") == "{}");
}

TEST_CASE("the atomic writer and append_record replace no link, FIFO or device", "[util][user_file]") {
  const k3::test::ScratchDir dir("writers");
  k3::write_file_atomically(dir / "target.json", "kept");
  fs::create_symlink(dir / "target.json", dir / "link.json");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  for (const fs::path& file : {dir / "link.json", dir / "fifo"}) {
    CAPTURE(file);
    CHECK_THROWS_AS(k3::write_file_atomically(file, "new"), k3::UsageError);
    CHECK_THROWS_AS(k3::append_record(file, "new\n"), k3::UsageError);  // a FIFO: refused, not waited on
  }
  CHECK(fs::is_symlink(dir / "link.json"));
  CHECK(fs::is_fifo(dir / "fifo"));
  CHECK(k3::test::read_whole(dir / "target.json") == "kept");
  CHECK(k3::test::listing(dir.path()) == "fifo\nlink.json\ntarget.json\n");  // no temporary left
}

TEST_CASE("append_record starts a new line after a last line without its end of line", "[util][user_file]") {
  const k3::test::ScratchDir dir("append-line");
  const fs::path log = dir / "h.jsonl";
  k3::write_file_atomically(log, "{\"a\":1}\n{\"b\":2}");  // a whole record, its '\n' missing
  k3::append_record(log, "{\"c\":3}\n");
  k3::append_record(log, "{\"d\":4}\n");
  CHECK(k3::test::read_whole(log) == "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"d\":4}\n");
}
