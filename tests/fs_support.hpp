// File system helpers for the tern test suite: a private temporary directory, and a temporary file holding given
// bytes, each removed at the end of the test.
#pragma once

#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace tern_test {

class temp_dir {
 public:
  temp_dir() {
    char pattern[] = "/tmp/tern-test-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    EXPECT_NE(made, nullptr);
    dir_ = made != nullptr ? made : "/tmp";
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  // Also lets go of a file system a test mounted inside (file_test's small tmpfs).
  ~temp_dir() { std::system(("umount -q '" + dir_ + "/small' 2>/dev/null; rm -rf '" + dir_ + "'").c_str()); }
  std::string path(std::string_view name) const { return dir_ + "/" + std::string(name); }

 private:
  std::string dir_;
};

class temp_file {
 public:
  explicit temp_file(const std::vector<char>& data) {
    char pattern[] = "/tmp/tern-test-file-XXXXXX";
    const int fd = ::mkstemp(pattern);
    EXPECT_GE(fd, 0);
    path_ = pattern;
    EXPECT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ::close(fd);
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  ~temp_file() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tern_test
