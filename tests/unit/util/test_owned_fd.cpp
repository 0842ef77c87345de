// util/owned_fd: one owner per descriptor; closed exactly once, when the owner goes.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <utility>

#include "util/owned_fd.hpp"

using k3::OwnedFd;

namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

int open_null() {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  return fd;
}

}  // namespace

TEST_CASE("the descriptor is closed when its owner is destroyed", "[util][owned_fd]") {
  int raw = -1;
  {
    const OwnedFd fd(open_null());
    raw = fd.get();
    CHECK(fd.valid());
    CHECK(is_open(raw));
  }
  CHECK_FALSE(is_open(raw));
}

TEST_CASE("moving hands the descriptor over and only the last owner closes it", "[util][owned_fd]") {
  OwnedFd a(open_null());
  const int raw = a.get();
  {
    OwnedFd b(std::move(a));
    CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    CHECK(b.get() == raw);
    a = std::move(b);  // and back
    CHECK(is_open(raw));
  }
  CHECK(is_open(raw));  // b went, but held nothing
  CHECK(a.get() == raw);

  OwnedFd c(open_null());
  const int other = c.get();
  c = std::move(a);  // c's own descriptor is closed, a's taken over
  CHECK_FALSE(is_open(other));
  CHECK(is_open(raw));
  CHECK(c.get() == raw);
}

TEST_CASE("release gives the descriptor up, reset and close close it", "[util][owned_fd]") {
  SECTION("release") {
    int raw = -1;
    {
      OwnedFd fd(open_null());
      raw = fd.release();
      CHECK_FALSE(fd.valid());
    }
    CHECK(is_open(raw));
    ::close(raw);
  }
  SECTION("reset") {
    OwnedFd fd(open_null());
    const int first = fd.get();
    fd.reset(open_null());
    CHECK_FALSE(is_open(first));
    CHECK(fd.valid());
    const int second = fd.get();
    fd.reset();
    CHECK_FALSE(is_open(second));
    CHECK_FALSE(fd.valid());
  }
  SECTION("close reports success once, then there is nothing to close") {
    OwnedFd fd(open_null());
    const int raw = fd.get();
    CHECK(fd.close() == 0);
    CHECK_FALSE(is_open(raw));
    CHECK_FALSE(fd.valid());
    CHECK(fd.close() == 0);
  }
  SECTION("a failed open owns nothing") {
    const OwnedFd fd(::open("/no/such/file", O_RDONLY | O_CLOEXEC));
    CHECK_FALSE(fd.valid());
    CHECK(fd.get() == -1);
  }
}
